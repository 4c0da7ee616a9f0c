#include "model/loader/tensor_names.h"

#include "model/config/model_config.h"

namespace hyllm {

namespace {

bool replace_suffix(std::string& s, std::string_view from, std::string_view to) {
  if (!s.ends_with(from)) return false;
  s.replace(s.size() - from.size(), from.size(), to);
  return true;
}

}  // namespace

std::optional<std::string> canonical_tensor_name(std::string_view checkpoint_name) {
  for (std::string_view skipped : {"model.visual.", "visual."}) {
    if (checkpoint_name.starts_with(skipped)) return std::nullopt;
  }
  std::string name = canonical_module_name(checkpoint_name);
  replace_suffix(name, ".self_attn.k_proj.k_scale", ".self_attn.k_scale") ||
      replace_suffix(name, ".self_attn.v_proj.v_scale", ".self_attn.v_scale") ||
      replace_suffix(name, ".self_attn.attn.k_scale", ".self_attn.k_scale") ||
      replace_suffix(name, ".self_attn.attn.v_scale", ".self_attn.v_scale");
  return name;
}

bool is_valid_tensor_name(std::string_view name) {
  if (name.empty()) return false;
  size_t i = 0;
  while (i < name.size()) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > name.size()) return false;
    for (int k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(name[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

}  // namespace hyllm
