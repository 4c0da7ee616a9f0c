#pragma once
// Checkpoint tensor names -> canonical names.

#include <optional>
#include <string>
#include <string_view>

namespace hyllm {

// The canonical name of a checkpoint tensor, or nullopt for tensors hyllm does
// not load (the vision tower "model.visual.*" / "visual.*"). Strips
// "model.language_model." or "model." (so the MTP head's "mtp.*",
// "model.mtp.*" and "model.language_model.mtp.*" all become "mtp.*"); remaps KV-cache
// scales to their attention layer: "...self_attn.k_proj.k_scale" and
// "...self_attn.attn.k_scale" -> "...self_attn.k_scale" (same for v).
std::optional<std::string> canonical_tensor_name(std::string_view checkpoint_name);

// Whether a string is well-formed UTF-8 without control characters (what a
// tensor name may contain).
bool is_valid_tensor_name(std::string_view name);

}  // namespace hyllm
