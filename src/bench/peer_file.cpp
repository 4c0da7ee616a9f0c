#include "bench/peer_file.h"

#include <ctime>
#include <fstream>
#include <regex>

#include "util/status.h"

namespace hyllm::bench {
namespace {

nlohmann::ordered_json read(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::kNotFound, "peer file {} not found", path.string());
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail(ErrorCode::kCorruptData, "peer file {} is not a JSON object", path.string());
  return j;
}

std::string as_string(const nlohmann::ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

ArmSpec parse_arm(const nlohmann::ordered_json& j, const std::string& key, const std::filesystem::path& path) {
  if (!j.contains(key) || !j[key].is_object()) fail(ErrorCode::kCorruptData, "peer file {}: missing object \"{}\"", path.string(), key);
  const auto& a = j[key];
  ArmSpec arm;
  arm.name = a.value("name", key);
  if (!a.contains("launch") || !a["launch"].is_array() || a["launch"].empty())
    fail(ErrorCode::kCorruptData, "peer file {}: \"{}.launch\" must be a non-empty array", path.string(), key);
  for (const auto& s : a["launch"]) arm.launch.push_back(as_string(s));
  if (a.contains("env"))
    for (auto it = a["env"].begin(); it != a["env"].end(); ++it) arm.env[it.key()] = as_string(it.value());
  arm.version = a.value("version", "");
  if (a.contains("expected_args"))
    for (auto it = a["expected_args"].begin(); it != a["expected_args"].end(); ++it)
      arm.expected_args[it.key()] = as_string(it.value());
  arm.version_path = a.value("version_path", arm.version_path);
  arm.version_field = a.value("version_field", arm.version_field);
  if (a.contains("expected_info"))
    for (auto it = a["expected_info"].begin(); it != a["expected_info"].end(); ++it)
      arm.expected_info[it.key()] = as_string(it.value());
  return arm;
}

}  // namespace

PeerFile load_peer_file(const std::filesystem::path& path) {
  PeerFile pf;
  pf.path = path;
  pf.raw = read(path);
  pf.ours = parse_arm(pf.raw, "ours", path);
  pf.peer = parse_arm(pf.raw, "peer", path);
  if (pf.peer.version.empty()) fail(ErrorCode::kCorruptData, "peer file {}: \"peer.version\" must be pinned", path.string());
  if (pf.raw.contains("matched"))
    for (auto it = pf.raw["matched"].begin(); it != pf.raw["matched"].end(); ++it)
      pf.matched[it.key()] = as_string(it.value());
  if (pf.raw.contains("workload")) {
    const auto& w = pf.raw["workload"];
    auto& o = pf.workload;
    o.input_len = w.value("input_len", o.input_len);
    o.output_len = w.value("output_len", o.output_len);
    if (w.contains("concurrency")) o.concurrency = w["concurrency"].get<std::vector<int>>();
    o.prompts_per_concurrency = w.value("prompts_per_concurrency", o.prompts_per_concurrency);
    o.min_prompts = w.value("min_prompts", o.min_prompts);
    o.reps = w.value("reps", o.reps);
    o.tie_band = w.value("tie_band", o.tie_band);
    o.temperature = w.value("temperature", o.temperature);
    o.ignore_eos = w.value("ignore_eos", o.ignore_eos);
    o.startup_timeout_s = w.value("startup_timeout_s", o.startup_timeout_s);
    o.all_at_once_prompts = w.value("all_at_once_prompts", o.all_at_once_prompts);
  }
  if (pf.workload.reps < 5)
    fail(ErrorCode::kInvalidArgument, "peer file {}: at least five interleaved repetitions are required (reps = {})",
         path.string(), pf.workload.reps);
  return pf;
}

std::string expand_placeholders(const std::string& t, const PeerFile& pf,
                                const std::map<std::string, std::string>& leg_values, const std::string& what) {
  static const std::regex placeholder(R"(\{([a-z_]+)\})");
  std::string out;
  size_t last = 0;
  for (auto it = std::sregex_iterator(t.begin(), t.end(), placeholder); it != std::sregex_iterator(); ++it) {
    const std::string key = (*it)[1];
    out += t.substr(last, static_cast<size_t>(it->position()) - last);
    if (auto v = leg_values.find(key); v != leg_values.end()) {
      out += v->second;
    } else if (auto m = pf.matched.find(key); m != pf.matched.end()) {
      out += m->second;
    } else {
      fail(ErrorCode::kInvalidArgument, "peer file {}: {} uses unknown placeholder {{{}}}", pf.path.string(), what,
           key);
    }
    last = static_cast<size_t>(it->position() + it->length());
  }
  out += t.substr(last);
  return out;
}

std::vector<std::string> expand_launch(const ArmSpec& arm, const PeerFile& pf,
                                       const std::map<std::string, std::string>& leg_values) {
  std::vector<std::string> argv;
  for (const auto& t : arm.launch) argv.push_back(expand_placeholders(t, pf, leg_values, arm.name + " launch"));
  return argv;
}

void pin_peer_file(const std::filesystem::path& path, const std::string& field, const std::string& value,
                   const std::string& reason) {
  if (reason.empty()) fail(ErrorCode::kInvalidArgument, "a pin change needs a --reason");
  nlohmann::ordered_json j = read(path);
  nlohmann::ordered_json::json_pointer ptr("/" + std::regex_replace(field, std::regex("\\."), "/"));
  nlohmann::ordered_json old = j.contains(ptr) ? j[ptr] : nlohmann::ordered_json(nullptr);
  j[ptr] = value;
  std::time_t t = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  j["history"].push_back({{"date", date}, {"field", field}, {"old", old}, {"new", value}, {"reason", reason}});
  {
    std::ofstream out(path);
    out << j.dump(2) << "\n";
    if (!out) fail(ErrorCode::kIo, "cannot write {}", path.string());
  }
  load_peer_file(path);  // the result must still be a valid peer file
}

}  // namespace hyllm::bench
