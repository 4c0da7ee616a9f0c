#pragma once
// Writing a whole text file, with the failure as an error (a std::ofstream
// left unchecked loses the file and says nothing).

#include <filesystem>
#include <string_view>

namespace hyllm {

// Replaces `path` with `text`; fails with kIo naming the path when the file
// cannot be opened or written.
void write_text_file(const std::filesystem::path& path, std::string_view text);

}  // namespace hyllm
