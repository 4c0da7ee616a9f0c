#pragma once
// GPT-2's byte-level alphabet: every byte maps to one printable code point so
// that vocabularies can store arbitrary bytes as text ("Ġ" is the space).

#include <string>
#include <string_view>

namespace hyllm::tokenizer_detail {

// The UTF-8 text of the code point byte b maps to.
const std::string& byte_level_char(unsigned char b);

// Appends the bytes the alphabet text stands for; returns false (appending
// nothing) when some code point of text is not in the alphabet. text must be
// valid UTF-8 (strings from parsed JSON are).
bool byte_level_to_bytes(std::string_view text, std::string& out);

// The alphabet text for raw bytes.
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace hyllm::tokenizer_detail
