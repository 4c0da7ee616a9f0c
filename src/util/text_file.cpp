#include "util/text_file.h"

#include <fstream>

#include "util/status.h"

namespace hyllm {

void write_text_file(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) fail(ErrorCode::kIo, "cannot write {}", path.string());
}

}  // namespace hyllm
