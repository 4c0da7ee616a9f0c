#pragma once
// Internals of the tool-call parsers (tool_parser.h): the block machinery
// both formats share. A block is the text from "<tool_call>" to
// "</tool_call>"; a format parses what is inside.

#include <string>
#include <string_view>

#include "serve/tool_parser.h"

namespace hyllm::serve {

namespace tool_parsing {
bool is_space(char c);
// The longest suffix of text that is a proper prefix of tag.
size_t partial_suffix(std::string_view text, std::string_view tag);
std::string_view skip_space(std::string_view s);
}  // namespace tool_parsing

class BlockToolCallParser : public ToolCallParser {
 public:
  ToolParse push(std::string_view text) final;
  ToolParse finish() final;

 protected:
  static constexpr std::string_view kBlockOpen = "<tool_call>";
  static constexpr std::string_view kBlockClose = "</tool_call>";
  enum class BlockStep {
    kWait,       // needs more text
    kDone,       // the block ended (calls announced, or nothing at all)
    kMalformed,  // nothing was announced and the block is no call: its text is content
  };
  // A block starts: the text after "<tool_call>" is in buffer_.
  virtual void begin_block() = 0;
  // Consumes block text from buffer_ (with take()), announcing calls and
  // their arguments. at_end: no more text will come.
  virtual BlockStep consume_block(ToolParse& out, bool at_end) = 0;

  std::string take(size_t n);  // moves n chars of buffer_ into the block's text
  ToolCallDelta& announce(ToolParse& out, std::string name);
  void add_arguments(ToolParse& out, std::string fragment);

  std::string buffer_;

 private:
  void drain(ToolParse& out, bool at_end);
  bool in_block_ = false;
  bool after_block_ = false;  // a call block just ended
  std::string block_text_;
};

std::unique_ptr<ToolCallParser> make_qwen3_coder_parser(const Json& tools);
std::unique_ptr<ToolCallParser> make_hermes_parser();

}  // namespace hyllm::serve
