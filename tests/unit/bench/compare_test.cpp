#include "bench/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "util/status.h"

namespace hyllm::bench {
namespace {

namespace fs = std::filesystem;

// Token id i <-> the word "w<i>".
class WordTokenizer : public PromptTokenizer {
 public:
  int32_t vocab_size() const override { return 50; }
  bool is_special(int32_t id) const override { return id < 2; }
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    std::istringstream in(text);
    std::string w;
    while (in >> w) ids.push_back(std::stoi(w.substr(1)));
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) s += " w" + std::to_string(id);
    return s;
  }
};

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("hyllm-bench-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

nlohmann::ordered_json peer_json(const std::string& peer_reports, const std::string& pinned) {
  nlohmann::ordered_json j;
  j["ours"] = {{"name", "hyllm"},
               {"launch", {HYLLM_FAKE_PEER, "{port}", "0.1.0", "{'max_num_seqs': {max_num_seqs}}", "1"}}};
  j["peer"] = {{"name", "vllm"},
               {"version", pinned},
               {"launch", {HYLLM_FAKE_PEER, "{port}", peer_reports,
                           "{'language_model_only': True, 'max_num_seqs': {max_num_seqs}}", "2"}},
               {"expected_args", {{"language_model_only", "True"}}}};
  j["matched"] = {{"max_num_seqs", 4}};
  j["workload"] = {{"input_len", 6}, {"output_len", 3}, {"concurrency", {1, 2}}, {"prompts_per_concurrency", 2},
                   {"min_prompts", 2}, {"reps", 5}, {"startup_timeout_s", 20}};
  j["history"] = nlohmann::ordered_json::array();
  return j;
}

fs::path write(const fs::path& dir, const nlohmann::ordered_json& j) {
  fs::path p = dir / "peer.json";
  std::ofstream(p) << j.dump(2);
  return p;
}

TEST(Compare, InterleavedLegsGiveRatiosAndVerdicts) {
  fs::path dir = temp_dir("ok");
  CompareOptions opt;
  opt.peer_file = load_peer_file(write(dir, peer_json("0.26.0", "0.26.0")));
  opt.model = "m";
  opt.out_dir = dir / "out";
  opt.markdown_path = dir / "BENCHMARKS.md";
  opt.command_line = "hyllm bench compare (test)";
  std::ostringstream log;
  CompareReport r = run_compare(opt, WordTokenizer{}, log);
  ASSERT_EQ(r.json["legs"].size(), 10u);
  // Arms alternate first place every repetition.
  EXPECT_EQ(r.json["legs"][0]["arm"], "hyllm");
  EXPECT_EQ(r.json["legs"][2]["arm"], "vllm");
  for (const auto& leg : r.json["legs"]) {
    EXPECT_FALSE(leg["non_default_args"].get<std::string>().empty());
    for (const auto& [c, v] : leg["by_concurrency"].items()) EXPECT_EQ(v["failed"], 0) << c;
  }
  EXPECT_EQ(r.json["legs"][1]["version"], "0.26.0");
  EXPECT_TRUE(r.json["legs"][0]["argv"][3].get<std::string>().find("'max_num_seqs': 4") != std::string::npos);
  auto s = r.json["summary"]["1"]["output_throughput"];
  EXPECT_GT(s["ratio_min"].get<double>(), 0.0);
  EXPECT_LE(s["ratio_min"].get<double>(), s["ratio_median"].get<double>());
  EXPECT_GE(s["ratio_max"].get<double>(), s["ratio_median"].get<double>());
  std::ifstream md(*opt.markdown_path);
  std::stringstream text;
  text << md.rdbuf();
  EXPECT_NE(text.str().find("| 2 | median_tpot_ms |"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Compare, VersionDriftStopsTheRun) {
  fs::path dir = temp_dir("drift");
  CompareOptions opt;
  opt.peer_file = load_peer_file(write(dir, peer_json("0.27.0rc1", "0.26.0")));
  opt.model = "m";
  opt.out_dir = dir / "out";
  std::ostringstream log;
  try {
    run_compare(opt, WordTokenizer{}, log);
    FAIL() << "drift not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'0.27.0rc1' but the peer file pins '0.26.0'"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Compare, MissingPinnedFlagStopsTheRun) {
  ArmSpec arm;
  arm.name = "vllm";
  arm.expected_args = {{"language_model_only", "True"}};
  EXPECT_THROW(check_identity(arm, "x", "INFO non-default args: {'model': 'm'}\n"), Error);
  EXPECT_THROW(check_identity(arm, "x", "no config line at all\n"), Error);
  EXPECT_NO_THROW(check_identity(arm, "x", "INFO non-default args: {'language_model_only': True}\n"));
}

TEST(Compare, RatioVerdictUsesTieBand) {
  EXPECT_EQ(summarize_ratios({1.01, 0.99, 1.0, 1.012, 0.995}, 0.015).verdict, "tie");
  EXPECT_EQ(summarize_ratios({1.05, 1.04, 1.06, 0.99, 1.03}, 0.015).verdict, "hyllm");
  EXPECT_EQ(summarize_ratios({0.9, 0.95, 0.97, 0.92, 0.99}, 0.015).verdict, "peer");
  auto s = summarize_ratios({1.2, 0.8, 1.0}, 0.015);
  EXPECT_DOUBLE_EQ(s.min, 0.8);
  EXPECT_DOUBLE_EQ(s.max, 1.2);
}

TEST(PeerFile, PinRecordsOldAndNewValues) {
  fs::path dir = temp_dir("pin");
  fs::path p = write(dir, peer_json("0.26.0", "0.26.0"));
  EXPECT_THROW(pin_peer_file(p, "peer.version", "0.27.0", ""), Error);  // a reason is required
  pin_peer_file(p, "peer.version", "0.27.0", "re-measure on the new release");
  PeerFile pf = load_peer_file(p);
  EXPECT_EQ(pf.peer.version, "0.27.0");
  ASSERT_EQ(pf.raw["history"].size(), 1u);
  EXPECT_EQ(pf.raw["history"][0]["old"], "0.26.0");
  EXPECT_EQ(pf.raw["history"][0]["new"], "0.27.0");
  EXPECT_EQ(pf.raw.begin().key(), "ours");  // key order preserved
  fs::remove_all(dir);
}

TEST(PeerFile, FewerThanFiveRepsIsRefused) {
  fs::path dir = temp_dir("reps");
  auto j = peer_json("0.26.0", "0.26.0");
  j["workload"]["reps"] = 3;
  EXPECT_THROW(load_peer_file(write(dir, j)), Error);
  fs::remove_all(dir);
}

TEST(PeerFile, UnknownPlaceholderIsAnError) {
  fs::path dir = temp_dir("ph");
  auto j = peer_json("0.26.0", "0.26.0");
  j["peer"]["launch"].push_back("{no_such_key}");
  PeerFile pf = load_peer_file(write(dir, j));
  EXPECT_THROW(expand_launch(pf.peer, pf, {{"port", "1"}}), Error);
  fs::remove_all(dir);
}

TEST(Compare, ServerInfoChecksPinnedValuesAndFindsTheVersion) {
  fs::path dir = temp_dir("info");
  auto j = peer_json("0.26.0", "0.26.0");
  j["peer"]["version_path"] = "/props";
  j["peer"]["version_field"] = "build_info";
  j["peer"]["expected_info"] = {{"total_slots", "{max_num_seqs}"}, {"default_generation_settings.n_ctx", "512"}};
  PeerFile pf = load_peer_file(write(dir, j));
  EXPECT_EQ(pf.peer.version_path, "/props");
  const nlohmann::json ok = {{"build_info", "b1-abc"}, {"total_slots", 4},
                             {"default_generation_settings", {{"n_ctx", 512}}}};
  EXPECT_EQ(check_server_info(pf.peer, pf, ok), "b1-abc");
  nlohmann::json wrong = ok;
  wrong["total_slots"] = 8;
  try {
    check_server_info(pf.peer, pf, wrong);
    FAIL() << "a different slot count was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("total_slots = 8 but the peer file pins 4"), std::string::npos) << e.what();
  }
  nlohmann::json missing = ok;
  missing["default_generation_settings"].erase("n_ctx");
  EXPECT_THROW(check_server_info(pf.peer, pf, missing), Error);
  // vLLM-style arms keep /version and its "version" field.
  EXPECT_EQ(pf.ours.version_path, "/version");
  EXPECT_EQ(check_server_info(pf.ours, pf, {{"version", "0.1.0"}}), "0.1.0");
  fs::remove_all(dir);
}

// The llama.cpp peer: prompt reuse off, one slot per concurrent request of
// max_model_len tokens, its identity from /props, and a pinned source whose
// pins no other file restates.
TEST(PeerFile, ShippedLlamaCppPeerMatchesHyllmsSettings) {
  fs::path root = HYLLM_SOURCE_DIR;
  const fs::path peer_path = root / "bench/peers/llamacpp.json";
  PeerFile pf = load_peer_file(peer_path);
  EXPECT_EQ(pf.peer.version_path, "/props");
  EXPECT_EQ(pf.peer.version_field, "build_info");
  EXPECT_EQ(pf.peer.expected_info.at("total_slots"), "{max_num_seqs}");
  EXPECT_EQ(pf.peer.expected_info.at("default_generation_settings.n_ctx"), "{max_model_len}");
  const auto argv = expand_launch(pf.peer, pf, {{"port", "1"}, {"gguf", "m.gguf"}, {"llama_server", "ls"}});
  auto value_of = [&](const std::string& flag) {
    auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? std::string("<absent>") : *(it + 1);
  };
  EXPECT_EQ(value_of("--parallel"), pf.matched.at("max_num_seqs"));
  EXPECT_EQ(std::stoll(value_of("--ctx-size")),
            std::stoll(pf.matched.at("max_num_seqs")) * std::stoll(pf.matched.at("max_model_len")));
  EXPECT_EQ(value_of("--flash-attn"), "on");
  EXPECT_EQ(value_of("--cache-ram"), "0");
  EXPECT_EQ(value_of("--ctx-checkpoints"), "0");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--no-cache-prompt"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--no-kv-unified"), argv.end());
  const auto ours = expand_launch(pf.ours, pf, {{"port", "1"}, {"hyllm", "h"}, {"model", "m"}, {"tokenizer", "m"}});
  EXPECT_NE(std::find(ours.begin(), ours.end(), "--no-enable-prefix-caching"), ours.end());
  const auto& src = pf.raw["source"];
  EXPECT_TRUE(std::regex_match(src["commit"].get<std::string>(), std::regex("[0-9a-f]{40}")));
  EXPECT_TRUE(std::regex_match(src["archive"]["sha256"].get<std::string>(), std::regex("[0-9a-f]{64}")));
  bool ui_off = false;
  for (const auto& f : src["cmake_flags"]) ui_off |= f == "-DLLAMA_BUILD_UI=OFF";
  EXPECT_TRUE(ui_off) << "llama.cpp's CMake downloads its web UI unless told not to";
  const std::string commit = src["commit"], sha = src["archive"]["sha256"];
  for (const char* sub : {"bench", "tools", "scripts", "src/bench", "apps", ".ci"}) {
    if (!fs::exists(root / sub)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / sub)) {
      if (!e.is_regular_file() || e.path() == peer_path) continue;
      if (e.path().string().find("node_modules") != std::string::npos) continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      EXPECT_EQ(text.find(pf.peer.version), std::string::npos) << e.path() << " restates the pinned build";
      EXPECT_EQ(text.find(commit), std::string::npos) << e.path() << " restates the pinned commit";
      EXPECT_EQ(text.find(sha), std::string::npos) << e.path() << " restates the archive's sha256";
    }
  }
}

// The shipped vLLM peer file is the only place that states the peer's pinned
// version and launch command: no other harness entry point, script or
// config (where a second harness would live) restates them.
TEST(PeerFile, ShippedVllmPeerIsTheOnlySourceOfItsPins) {
  fs::path root = HYLLM_SOURCE_DIR;
  const fs::path peer_path = root / "bench/peers/vllm.json";
  PeerFile pf = load_peer_file(peer_path);
  EXPECT_EQ(pf.peer.name, "vllm");
  EXPECT_EQ(pf.peer.expected_args.at("language_model_only"), "True");
  EXPECT_EQ(pf.peer.expected_args.at("enable_prefix_caching"), "False");
  ASSERT_GE(pf.peer.launch.size(), 2u);
  const std::regex launch(pf.peer.launch[0] + R"([\s"',\]\[]+)" + pf.peer.launch[1] + R"(\b)");
  const std::regex pin("vllm[^\n]{0,40}" + std::regex_replace(pf.peer.version, std::regex(R"(\.)"), R"(\.)"));
  int scanned = 0;
  for (const char* sub : {"bench", "tools", "scripts", "src/bench", "apps", ".ci"}) {
    if (!fs::exists(root / sub)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / sub)) {
      if (!e.is_regular_file() || e.path() == peer_path) continue;
      if (e.path().string().find("node_modules") != std::string::npos) continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      ++scanned;
      EXPECT_FALSE(std::regex_search(text, launch)) << e.path() << " restates the peer's launch command";
      EXPECT_FALSE(std::regex_search(text, pin)) << e.path() << " restates the peer's pinned version";
    }
  }
  EXPECT_GT(scanned, 5);
}

}  // namespace
}  // namespace hyllm::bench
