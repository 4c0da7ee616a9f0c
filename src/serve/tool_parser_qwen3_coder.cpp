// qwen3_coder: <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>
// A missing </parameter> is tolerated when the next tag follows (vLLM does
// the same); several <function=...> in one block are several calls.

#include <cmath>
#include <string>

#include "serve/json_fields.h"
#include "serve/tool_parser_impl.h"

namespace hyllm::serve {
namespace {

using namespace tool_parsing;

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
// A name this long or longer is no tag the model meant.
constexpr size_t kMaxNameBytes = 256;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool is_prefix_of(std::string_view s, std::string_view tag) { return tag.substr(0, s.size()) == s; }

// Where the tag `open`NAME`>` at the start of `s` ends: its `>`, or npos
// when it is not there or comes after a name of kMaxNameBytes or more. The
// limit holds however the text was cut into pieces: a stream gives up
// waiting at the same length.
size_t tag_end(std::string_view s, std::string_view open) {
  const size_t gt = s.find('>');
  return gt != std::string_view::npos && gt - open.size() < kMaxNameBytes ? gt : std::string_view::npos;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Around a value whitespace means nothing: the template writes newlines
// there, and a grammar-forced call may add a few blanks.
std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// The JSON value of a parameter's text, by the type its schema gives.
Json convert_value(std::string text, const Json* schema) {
  if (!text.empty() && text.front() == '\n') text.erase(0, 1);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (lower(text) == "null") return nullptr;
  std::vector<std::string> types;
  if (schema && schema->is_object()) {
    if (auto t = schema->find("type"); t != schema->end()) {
      if (t->is_string()) types.push_back(lower(t->get<std::string>()));
      if (t->is_array()) {
        for (const auto& e : *t) {
          if (e.is_string() && e != "null") types.push_back(lower(e.get<std::string>()));
        }
      }
    } else if (schema->contains("enum") || schema->contains("anyOf") || schema->contains("oneOf") ||
               schema->contains("properties")) {
      types.push_back("json");
    }
  }
  // Without a schema the value is a string (vLLM).
  if (types.empty() || types.front() == "string" || types.front() == "str" || types.front() == "text") {
    // A forced call's grammar allows a little whitespace around the value.
    return schema ? trim(text) : text;
  }
  const std::string& type = types.front();
  text = trim(text);
  try {
    if (type == "integer" || type == "int") {
      size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used == text.size()) return v;
      return text;
    }
    if (type == "number" || type == "float") {
      size_t used = 0;
      const double v = std::stod(text, &used);
      if (used != text.size() || !std::isfinite(v)) return text;
      if (v == std::floor(v) && std::fabs(v) < 9e15 && text.find_first_of(".eE") == std::string::npos) {
        return static_cast<long long>(v);
      }
      return v;
    }
    if (type == "boolean" || type == "bool") {
      const std::string l = lower(text);
      if (l == "true") return true;
      if (l == "false") return false;
      return text;
    }
    // object, array, or a schema without one type: JSON when it parses
    // (and nests no deeper than a request may).
    if (!json_depth_within(text)) return text;
    return Json::parse(text);
  } catch (const std::exception&) {
    return text;
  }
}

class Qwen3CoderParser final : public BlockToolCallParser {
 public:
  explicit Qwen3CoderParser(const Json& tools) : tools_(tools.is_array() ? tools : Json::array()) {}

 private:
  enum class Phase { kName, kBody, kValue, kAfterFunction };

  void begin_block() override {
    phase_ = Phase::kName;
    announced_ = false;
  }

  const Json* param_schema(const std::string& param) const {
    for (const auto& tool : tools_) {
      const Json& fn = tool["function"];
      if (!fn.is_object() || fn.value("name", "") != function_) continue;
      auto params = fn.find("parameters");
      if (params == fn.end() || !params->is_object()) return nullptr;
      auto props = params->find("properties");
      if (props == params->end() || !props->is_object()) return nullptr;
      auto p = props->find(param);
      return p == props->end() ? nullptr : &*p;
    }
    return nullptr;
  }

  void emit_param(ToolParse& out, std::string value) {
    std::string fragment = num_params_++ == 0 ? "{" : ", ";
    fragment += Json(param_).dump() + ": " + convert_value(std::move(value), param_schema(param_)).dump();
    add_arguments(out, std::move(fragment));
  }
  void close_call(ToolParse& out) { add_arguments(out, num_params_ == 0 ? "{}" : "}"); }

  BlockStep consume_block(ToolParse& out, bool at_end) override {
    for (;;) {
      const std::string_view rest = skip_space(buffer_);
      const size_t ws = buffer_.size() - rest.size();
      switch (phase_) {
        case Phase::kName: {
          if (starts_with(rest, kFunctionOpen)) {
            const size_t gt = tag_end(rest, kFunctionOpen);
            if (gt == std::string_view::npos) {
              if (!at_end && rest.size() < kFunctionOpen.size() + kMaxNameBytes) return BlockStep::kWait;
              return announced_ ? BlockStep::kDone : BlockStep::kMalformed;
            }
            std::string name(rest.substr(kFunctionOpen.size(), gt - kFunctionOpen.size()));
            if (name.empty() || name.find_first_of("<\n") != std::string::npos) {
              return announced_ ? BlockStep::kDone : BlockStep::kMalformed;
            }
            take(ws + gt + 1);
            function_ = name;
            announce(out, std::move(name));
            announced_ = true;
            num_params_ = 0;
            phase_ = Phase::kBody;
            continue;
          }
          if (!at_end && is_prefix_of(rest, kFunctionOpen)) return BlockStep::kWait;
          return announced_ ? BlockStep::kDone : BlockStep::kMalformed;
        }
        case Phase::kBody: {
          if (starts_with(rest, kParamOpen)) {
            const size_t gt = tag_end(rest, kParamOpen);
            if (gt == std::string_view::npos && !at_end && rest.size() < kParamOpen.size() + kMaxNameBytes) {
              return BlockStep::kWait;
            }
            if (gt == std::string_view::npos) {  // no parameter after all: end the call
              close_call(out);
              return BlockStep::kDone;
            }
            param_ = std::string(rest.substr(kParamOpen.size(), gt - kParamOpen.size()));
            take(ws + gt + 1);
            phase_ = Phase::kValue;
            continue;
          }
          if (starts_with(rest, kFunctionClose)) {
            take(ws + kFunctionClose.size());
            close_call(out);
            phase_ = Phase::kAfterFunction;
            continue;
          }
          if (starts_with(rest, kBlockClose)) {
            take(ws + kBlockClose.size());
            close_call(out);
            return BlockStep::kDone;
          }
          if (!at_end && (is_prefix_of(rest, kParamOpen) || is_prefix_of(rest, kFunctionClose) ||
                          is_prefix_of(rest, kBlockClose))) {
            return BlockStep::kWait;
          }
          if (at_end) {
            take(buffer_.size());
            close_call(out);
            return BlockStep::kDone;
          }
          // Stray text between parameters: shown as content, never dropped.
          size_t next = rest.find('<', 1);
          if (next == std::string_view::npos) next = rest.size();
          out.content += take(ws + next);
          continue;
        }
        case Phase::kValue: {
          size_t end = buffer_.find(kParamClose);
          size_t skip = kParamClose.size();
          // Tolerated: the next tag without </parameter>.
          for (std::string_view next : {std::string_view("\n<parameter="), std::string_view("\n</function>")}) {
            const size_t at = buffer_.find(next);
            if (at != std::string::npos && (end == std::string::npos || at < end)) end = at, skip = 1;
          }
          if (end == std::string::npos) {
            if (!at_end) return BlockStep::kWait;
            emit_param(out, take(buffer_.size()));
            close_call(out);
            return BlockStep::kDone;
          }
          std::string value = take(end);
          take(skip);
          emit_param(out, std::move(value));
          phase_ = Phase::kBody;
          continue;
        }
        case Phase::kAfterFunction: {
          if (starts_with(rest, kBlockClose)) {
            take(ws + kBlockClose.size());
            return BlockStep::kDone;
          }
          if (starts_with(rest, kFunctionOpen)) {
            phase_ = Phase::kName;
            continue;
          }
          if (!at_end && (is_prefix_of(rest, kBlockClose) || is_prefix_of(rest, kFunctionOpen))) {
            return BlockStep::kWait;
          }
          return BlockStep::kDone;  // what follows is outside the block
        }
      }
    }
  }

  Json tools_;
  Phase phase_ = Phase::kName;
  bool announced_ = false;
  std::string function_, param_;
  int num_params_ = 0;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_qwen3_coder_parser(const Json& tools) {
  return std::make_unique<Qwen3CoderParser>(tools);
}

}  // namespace hyllm::serve
