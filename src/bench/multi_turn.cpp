#include "bench/multi_turn.h"

#include <atomic>
#include <thread>

#include "util/status.h"

namespace hyllm::bench {

std::vector<Conversation> make_multi_turn_conversations(const PromptTokenizer& tok, const MultiTurnOptions& opt) {
  if (opt.num_conversations <= 0) fail(ErrorCode::kInvalidArgument, "--num-prompts must be positive");
  if (opt.num_turns <= 0) fail(ErrorCode::kInvalidArgument, "--multi-turn-num-turns must be positive");
  if (opt.prefix_len < 0 || opt.input_len <= 0 || opt.output_len <= 0)
    fail(ErrorCode::kInvalidArgument,
         "--multi-turn-input-len and -output-len must be positive, --multi-turn-prefix-len >= 0");
  PromptSampler sampler(tok, opt.seed);
  std::vector<int32_t> system = sampler.draw_ids(opt.prefix_len);
  const std::string system_text = opt.prefix_len > 0 ? sampler.fit(system) : "";
  std::vector<Conversation> out(static_cast<size_t>(opt.num_conversations));
  for (Conversation& c : out) {
    c.system = system_text;
    c.system_len = static_cast<int>(system.size());
    c.user_len = opt.input_len;
    c.output_len = opt.output_len;
    for (int t = 0; t < opt.num_turns; ++t) {
      std::vector<int32_t> ids = sampler.draw_ids(opt.input_len);
      c.user_messages.push_back(sampler.fit(ids));
    }
  }
  return out;
}

RequestInput multi_turn_request(const RequestInput& base, EndpointKind kind, const Conversation& c, int turn,
                                const std::vector<std::string>& answers) {
  HYLLM_CHECK(turn >= 0 && turn < static_cast<int>(c.user_messages.size()) &&
                  static_cast<int>(answers.size()) >= turn,
              "turn {} of {} with {} answers", turn, c.user_messages.size(), answers.size());
  RequestInput in = base;
  in.max_tokens = c.output_len;
  in.prompt_len = c.system_len + (turn + 1) * c.user_len + turn * c.output_len;  // usage replaces it
  if (kind == EndpointKind::kChat) {
    nlohmann::json messages = nlohmann::json::array();
    if (!c.system.empty()) messages.push_back({{"role", "system"}, {"content", c.system}});
    for (int t = 0; t <= turn; ++t) {
      messages.push_back({{"role", "user"}, {"content", c.user_messages[static_cast<size_t>(t)]}});
      if (t < turn) messages.push_back({{"role", "assistant"}, {"content", answers[static_cast<size_t>(t)]}});
    }
    in.prompt = c.user_messages[static_cast<size_t>(turn)];
    in.extra_body["messages"] = std::move(messages);
  } else {
    std::string prompt = c.system;
    for (int t = 0; t <= turn; ++t) {
      if (!prompt.empty()) prompt += "\n\n";
      prompt += c.user_messages[static_cast<size_t>(t)];
      if (t < turn) prompt += "\n\n" + answers[static_cast<size_t>(t)];
    }
    in.prompt = std::move(prompt);
  }
  return in;
}

LoadRun run_multi_turn(const std::vector<Conversation>& conversations, const RequestInput& base, EndpointKind kind,
                       std::optional<int> max_concurrency, const SendFn& send) {
  if (max_concurrency && *max_concurrency <= 0) fail(ErrorCode::kInvalidArgument, "--max-concurrency must be positive");
  std::vector<size_t> first_result(conversations.size() + 1, 0);
  for (size_t i = 0; i < conversations.size(); ++i)
    first_result[i + 1] = first_result[i] + conversations[i].user_messages.size();
  LoadRun run;
  run.results.resize(first_result.back());
  std::atomic<size_t> next{0};
  const int workers = static_cast<int>(std::min<size_t>(
      conversations.size(), max_concurrency ? static_cast<size_t>(*max_concurrency) : conversations.size()));
  const double start = now_s();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < conversations.size(); i = next++) {
        const Conversation& c = conversations[i];
        std::vector<std::string> answers;
        bool failed = false;
        for (int t = 0; t < static_cast<int>(c.user_messages.size()); ++t) {
          RequestResult& r = run.results[first_result[i] + static_cast<size_t>(t)];
          if (failed) {
            r.error = "an earlier turn of the conversation failed";
            continue;
          }
          try {
            r = send(multi_turn_request(base, kind, c, t, answers));
          } catch (const std::exception& e) {
            r.success = false;
            r.error = e.what();
          }
          failed = !r.success;
          answers.push_back(r.generated_text);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  run.duration_s = now_s() - start;
  return run;
}

}  // namespace hyllm::bench
