#pragma once
// Internal to the config parser: the quantization section.

#include <nlohmann/json.hpp>

#include <string>

#include "model/config/model_config.h"

namespace hyllm::config_detail {

// `qc` is config.json's quantization_config (or null); `hf_quant` the parsed
// hf_quant_config.json (or null). config.json wins when both are present.
QuantConfig parse_quant_config(const nlohmann::json* qc, const std::string& where, const nlohmann::json* hf_quant);

// fnmatch-style: '*' matches any run of characters (dots included), '?' one.
bool glob_match(std::string_view text, std::string_view pattern);

// Whether an exclude pattern (canonical, see canonical_module_name) covers the
// canonical module name: a wildcard pattern is matched by glob against the
// module or its children; a plain pattern names the module, one of its parents
// or a dotted suffix of it ("mlp.gate" covers "layers.0.mlp.gate", not
// "layers.0.mlp.gate_proj").
bool module_pattern_matches(std::string_view module, std::string_view pattern);

}  // namespace hyllm::config_detail
