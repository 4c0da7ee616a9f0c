// hermes: <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
// A call is announced when its block closes and its JSON parses, so a
// malformed one stays in content whole.

#include "serve/json_fields.h"
#include "serve/tool_parser_impl.h"

namespace hyllm::serve {
namespace {

using namespace tool_parsing;

class HermesParser final : public BlockToolCallParser {
 private:
  void begin_block() override {}

  BlockStep consume_block(ToolParse& out, bool at_end) override {
    size_t end = buffer_.find(kBlockClose);
    if (end == std::string::npos && !at_end) return BlockStep::kWait;
    const bool closed = end != std::string::npos;
    if (!closed) end = buffer_.size();
    Json call;
    const std::string_view block(buffer_.data(), end);
    if (!json_depth_within(block)) return BlockStep::kMalformed;  // printing it would recurse that deep
    try {
      call = Json::parse(block);
    } catch (const std::exception&) {
      return BlockStep::kMalformed;
    }
    auto name = call.find("name");
    if (!call.is_object() || name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return BlockStep::kMalformed;
    }
    Json args = call.contains("arguments") ? call["arguments"] : call.value("parameters", Json::object());
    if (args.is_string() && json_depth_within(args.get_ref<const std::string&>())) {
      // Some models write the arguments as a JSON string.
      try {
        args = Json::parse(args.get<std::string>());
      } catch (const std::exception&) {
      }
    }
    if (args.is_null()) args = Json::object();
    take(end + (closed ? kBlockClose.size() : 0));
    announce(out, name->get<std::string>()).arguments = "";
    add_arguments(out, args.dump());
    return BlockStep::kDone;
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> make_hermes_parser() { return std::make_unique<HermesParser>(); }

}  // namespace hyllm::serve
