// The parts the tool-call parsers share: text outside calls, call blocks,
// ids, and the structural tags that force calls in each format.

#include "serve/tool_parser.h"

#include <fmt/format.h>

#include <random>

#include "serve/tool_parser_impl.h"

namespace hyllm::serve {

namespace tool_parsing {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t partial_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

std::string_view skip_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return s.substr(i);
}

}  // namespace tool_parsing

using namespace tool_parsing;

ToolParse BlockToolCallParser::push(std::string_view text) {
  buffer_ += text;
  ToolParse out;
  drain(out, false);
  return out;
}

ToolParse BlockToolCallParser::finish() {
  ToolParse out;
  drain(out, true);
  return out;
}

void BlockToolCallParser::drain(ToolParse& out, bool at_end) {
  for (;;) {
    if (!in_block_) {
      if (after_block_) {
        // Whitespace between calls, or after the last, is layout, not content.
        const std::string_view rest = skip_space(buffer_);
        if (rest.empty() && !at_end) return;
        if (rest.empty() || rest.substr(0, kBlockOpen.size()) == kBlockOpen) {
          buffer_.erase(0, buffer_.size() - rest.size());
        } else if (!at_end && kBlockOpen.substr(0, rest.size()) == rest) {
          return;
        }
        after_block_ = false;
      }
      const size_t at = buffer_.find(kBlockOpen);
      if (at == std::string::npos) {
        const size_t keep = at_end ? 0 : partial_suffix(buffer_, kBlockOpen);
        out.content += buffer_.substr(0, buffer_.size() - keep);
        buffer_.erase(0, buffer_.size() - keep);
        return;
      }
      out.content += buffer_.substr(0, at);
      buffer_.erase(0, at + kBlockOpen.size());
      in_block_ = true;
      block_text_ = std::string(kBlockOpen);
      begin_block();
    }
    const BlockStep step = consume_block(out, at_end);
    if (step == BlockStep::kWait) return;
    if (step == BlockStep::kMalformed) {
      // Nothing of this block was announced: all of its text is content.
      out.content += block_text_;
      block_text_.clear();
    } else {
      after_block_ = true;
    }
    in_block_ = false;
  }
}

std::string BlockToolCallParser::take(size_t n) {
  std::string s = buffer_.substr(0, n);
  buffer_.erase(0, n);
  block_text_ += s;
  return s;
}

ToolCallDelta& BlockToolCallParser::announce(ToolParse& out, std::string name) {
  ToolCallDelta d;
  d.index = num_calls_++;
  d.id = make_tool_call_id();
  d.name = std::move(name);
  out.calls.push_back(std::move(d));
  return out.calls.back();
}

void BlockToolCallParser::add_arguments(ToolParse& out, std::string fragment) {
  if (fragment.empty()) return;
  if (!out.calls.empty() && out.calls.back().index == num_calls_ - 1) {
    out.calls.back().arguments += fragment;
    return;
  }
  ToolCallDelta d;
  d.index = num_calls_ - 1;
  d.arguments = std::move(fragment);
  out.calls.push_back(std::move(d));
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name, const Json& tools) {
  if (name == "qwen3_coder") return make_qwen3_coder_parser(tools);
  if (name == "hermes") return make_hermes_parser();
  return nullptr;
}

bool is_tool_call_parser(std::string_view name) { return name == "qwen3_coder" || name == "hermes"; }

std::string make_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-tool-{:016x}{:016x}", rng(), rng());
}

namespace {

// Whitespace a forced call may put between its parts: enough for any layout a
// template uses, and a weak model cannot fill its budget with blanks.
constexpr int kMaxForcedWhitespace = 4;

Json tool_parameters(const Json& tool) {
  const Json& fn = tool.at("function");
  auto p = fn.find("parameters");
  if (p == fn.end() || p->is_null()) return Json{{"type", "object"}, {"properties", Json::object()}};
  return *p;
}

Json call_tag(std::string_view parser, const Json& tool) {
  const std::string name = tool.at("function").at("name").get<std::string>();
  Json tag{{"type", "tag"}};
  if (parser == "qwen3_coder") {
    tag["begin"] = "<tool_call>\n<function=" + name + ">\n";
    tag["content"] = {{"type", "json_schema"}, {"json_schema", tool_parameters(tool)}, {"style", "qwen_xml"},
                      {"max_whitespace_cnt", kMaxForcedWhitespace}};
    tag["end"] = "\n</function>\n</tool_call>";
  } else {
    tag["begin"] = "<tool_call>\n{\"name\": " + Json(name).dump() + ", \"arguments\": ";
    tag["content"] = {{"type", "json_schema"}, {"json_schema", tool_parameters(tool)},
                      {"max_whitespace_cnt", kMaxForcedWhitespace}};
    tag["end"] = "}\n</tool_call>";
  }
  return tag;
}

}  // namespace

std::string forced_tool_calls_structural_tag(std::string_view parser, const Json& tools, const std::string* only_tool,
                                             bool parallel) {
  Json format;
  if (only_tool) {
    for (const auto& tool : tools) {
      if (tool.at("function").at("name") == *only_tool) format = call_tag(parser, tool);
    }
  } else {
    Json tags = Json::array();
    for (const auto& tool : tools) tags.push_back(call_tag(parser, tool));
    format = {{"type", "tags_with_separator"}, {"tags", std::move(tags)}, {"separator", "\n"},
              {"at_least_one", true}, {"stop_after_first", !parallel}};
  }
  return Json{{"type", "structural_tag"}, {"format", std::move(format)}}.dump();
}

}  // namespace hyllm::serve
