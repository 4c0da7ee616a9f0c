// The Jinja template engine: the input is a template source, then optionally
// a NUL and a JSON object of variables (when absent or not an object, a small
// conversation is used). Parsing and rendering either succeed or throw a
// clean error; the sandbox caps hold: output never exceeds its cap, and
// nesting never exhausts the stack (ASan reports a stack overflow).
//
// The step, loop and output caps are lowered so that one input takes
// milliseconds; the depth caps stay at the server's values, since those are
// what keep recursion within a connection thread's stack.

#include <nlohmann/json.hpp>

#include <cstdint>

#include "fuzz_util.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"

using namespace hyllm;

namespace {

const nlohmann::ordered_json& default_variables() {
  static const auto vars = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <b>there</b>"},
                 {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                   "function": {"name": "f", "arguments": {"x": 1, "y": [1.5, null, true]}}}]},
                 {"role": "tool", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
  })");
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = fuzz::split_nul(fuzz::as_text(data, size), 2);
  jinja::TemplateOptions options;
  options.limits.max_steps = 200'000;
  options.limits.max_loop_iterations = 20'000;
  options.limits.max_output_bytes = 1u << 20;
  options.fixed_time = 1700000000;

  nlohmann::ordered_json vars = default_variables();
  if (parts.size() == 2) {
    auto given = nlohmann::ordered_json::parse(parts[1], nullptr, /*allow_exceptions=*/false);
    if (given.is_object()) vars = std::move(given);
  }
  fuzz::expect_clean_errors([&] {
    jinja::Template t = jinja::Template::parse(parts[0], options);
    jinja::Variables variables;
    for (const auto& [key, value] : vars.items()) variables.emplace_back(key, jinja::value_from_json(value));
    std::string out = t.render(variables);
    if (out.size() > options.limits.max_output_bytes) fuzz::finding("output above the cap");
  });
  return 0;
}
