#pragma once
// Python str methods templates call (startswith, split, strip, replace ...),
// and the string transforms filters share with them.

#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace hyllm::jinja {

// A bound method of the string `self`, or a plain undefined when str has no
// such method.
Value string_method(const Value& self, const std::string& name);

// str.strip/lstrip/rstrip: chars empty and !has_chars means whitespace.
std::string strip_chars(std::string_view s, bool has_chars, std::string_view chars, bool left, bool right);
// str.replace(old, new, count); count < 0 means all.
std::string replace_all(std::string_view s, std::string_view old_sub, std::string_view new_sub, int64_t count);
std::string capitalize(std::string_view s);
// jinja2's title filter (not Python's str.title).
std::string jinja_title(std::string_view s);
std::string python_title(std::string_view s);

}  // namespace hyllm::jinja
