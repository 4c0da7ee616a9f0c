// Loading tokenizer.json (and tokenizer_config.json): the input is
// tokenizer.json, then optionally a NUL and tokenizer_config.json. A
// tokenizer that loads must encode and decode without failing on valid
// text, and its special-token lookups must agree with its vocabulary.

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"

using namespace hyllm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = fuzz::split_nul(fuzz::as_text(data, size), 2);
  fuzz::expect_clean_errors([&] {
    Tokenizer tok = Tokenizer::from_json_string(parts[0], parts.size() == 2 ? parts[1] : std::string_view());
    const int32_t vocab = tok.vocab_size();
    if (vocab < 0) fuzz::finding("negative vocab size");
    std::vector<int32_t> ids;
    for (std::string_view text : {"Hello, world! 123", "  héllo\n\twörld ", "<|im_start|>user\nhi<|im_end|>", ""}) {
      for (bool special : {false, true}) {
        std::vector<int32_t> got = tok.encode(text, special, !special);
        for (int32_t id : got) {
          if (id < 0 || id >= vocab) fuzz::finding("encode produced an id outside the vocabulary");
        }
        ids.insert(ids.end(), got.begin(), got.end());
      }
    }
    for (int32_t id = -2; id < std::min<int32_t>(vocab, 64) + 2; ++id) ids.push_back(id);
    for (bool skip : {false, true}) {
      std::string whole = tok.decode(ids, skip);
      IncrementalDetokenizer detok(tok, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += detok.push(id);
      streamed += detok.finish();
      if (streamed != whole) fuzz::finding("incremental detokenization differs from decode");
    }
    for (int32_t id : {0, vocab - 1, vocab, -1}) {
      (void)tok.id_to_token(id);
      (void)tok.token_bytes(id);
      (void)tok.is_special(id);
    }
    for (auto token_id : {tok.bos_token_id(), tok.eos_token_id(), tok.pad_token_id(), tok.unk_token_id()}) {
      if (token_id && (*token_id < 0 || *token_id >= vocab)) fuzz::finding("a special token id is outside the vocabulary");
    }
    (void)tok.chat_template_source();
  });
  return 0;
}
