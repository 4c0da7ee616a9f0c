// `hyllm serve --skip-tokenizer-init`: requests that need text are refused
// with a 400 that names the field, before anything reaches the engine.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "serve/api_error.h"
#include "serve/handlers.h"
#include "serve/serving_context.h"

namespace hyllm::serve {
namespace {

// The context as cmd_serve builds it with the flag: no tokenizer, no chat
// template, the model's vocabulary. No engine: every request here must be
// refused before one would be needed.
ServingContext context_without_tokenizer() {
  ServingContext ctx;
  ctx.served_model_names = {"tiny"};
  ctx.model_vocab_size = 100;
  ctx.max_model_len = 64;
  return ctx;
}

ApiError refusal(const std::function<void()>& call) {
  try {
    call();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "the request was not refused";
  return ApiError(0, "");
}

class SkipTokenizerInit : public ::testing::Test {
 protected:
  ApiError completions(const std::string& body) {
    return refusal([&] { handle_completions(ctx_, activity_, body, res_); });
  }

  ServingContext ctx_ = context_without_tokenizer();
  ActivityCounter activity_;
  httplib::Response res_;
};

TEST_F(SkipTokenizerInit, TextPromptsAreRefused) {
  for (const char* body : {R"({"prompt": "hello", "max_tokens": 4})", R"({"prompt": ["a", "b"], "max_tokens": 4})"}) {
    ApiError e = completions(body);
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "prompt");
    EXPECT_NE(std::string(e.what()).find("Tokenizer not available when `skip_tokenizer_init=True`"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(SkipTokenizerInit, StopStringsAndEchoNeedText) {
  ApiError stop = completions(R"({"prompt": [1, 2, 3], "max_tokens": 4, "stop": ["."]})");
  EXPECT_EQ(stop.status(), 400);
  EXPECT_EQ(stop.param(), "stop");
  EXPECT_NE(std::string(stop.what()).find("stop_token_ids"), std::string::npos) << stop.what();
  ApiError echo = completions(R"({"prompt": [1, 2, 3], "max_tokens": 4, "echo": true})");
  EXPECT_EQ(echo.status(), 400);
  EXPECT_EQ(echo.param(), "echo");
}

TEST_F(SkipTokenizerInit, TokenIdsAreCheckedAgainstTheModelVocabulary) {
  ApiError e = completions(R"({"prompt": [1, 100], "max_tokens": 4})");
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "prompt");
  EXPECT_NE(std::string(e.what()).find("Token id 100 is out of vocabulary"), std::string::npos) << e.what();
  EXPECT_EQ(ctx_.vocab_size(), 100);
}

TEST_F(SkipTokenizerInit, ChatAndTokenizeAreRefused) {
  ApiError chat = refusal([&] {
    handle_chat_completions(ctx_, activity_, R"({"messages": [{"role": "user", "content": "hi"}]})", res_);
  });
  EXPECT_EQ(chat.status(), 400);
  EXPECT_EQ(chat.param(), "messages");
  ApiError tokenize = refusal([&] { handle_tokenize(ctx_, R"({"prompt": "hi"})", res_); });
  EXPECT_EQ(tokenize.status(), 400);
  EXPECT_EQ(tokenize.param(), "prompt");
  ApiError detokenize = refusal([&] { handle_detokenize(ctx_, R"({"tokens": [1, 2]})", res_); });
  EXPECT_EQ(detokenize.status(), 400);
  EXPECT_EQ(detokenize.param(), "tokens");
}

TEST_F(SkipTokenizerInit, UnknownModelsStillGet404First) {
  ApiError e = completions(R"({"model": "other", "prompt": "hello"})");
  EXPECT_EQ(e.status(), 404);
}

}  // namespace
}  // namespace hyllm::serve
