#pragma once
// Code point helpers: Python strings index, slice and measure by code point,
// while our strings are UTF-8 bytes.

#include <string>
#include <string_view>
#include <vector>

namespace hyllm::jinja::utf8 {

// Decodes the code point at s[i] and advances i. Malformed bytes decode as
// U+FFFD and consume one byte, so every input terminates.
char32_t next(std::string_view s, size_t& i);
void append(std::string& out, char32_t cp);
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view cps);
size_t length(std::string_view s);

// Python's str.isspace() for one character.
bool is_space(char32_t cp);
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);
bool is_alnum(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
// Python's str.isprintable() for one character (repr escapes the rest).
bool is_printable(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
std::string upper(std::string_view s);
std::string lower(std::string_view s);

}  // namespace hyllm::jinja::utf8
