// Experiment tracking and the timeline: CRC-32C and TFRecord framing, the Event/Summary encoding, metrics.csv
// rows, what a record becomes in TensorBoard, the time stamps of records, the phase timeline and its cap, and
// the comparison of runs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "ragtrain/metrics/compare.hpp"
#include "ragtrain/metrics/provenance.hpp"
#include "ragtrain/metrics/run_records.hpp"
#include "ragtrain/metrics/tensorboard.hpp"
#include "ragtrain/metrics/trace.hpp"

using namespace ragtrain;

namespace {

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

}  // namespace

TEST(TensorBoard, Crc32cMatchesTheRfc3720Vectors) {
  // RFC 3720 appendix B.4 (iSCSI), and the usual check value of "123456789".
  const std::string zeros(32, '\0'), ones(32, '\xff');
  std::string up;
  for (int i = 0; i < 32; ++i) up.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), up.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  // The mask: rotate right by 15, add 0xa282ead8.
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, TfrecordFramesLengthPayloadAndTheirCrcs) {
  const std::string payload = "hello event";
  const std::string r = tfrecord(payload);
  ASSERT_EQ(r.size(), 8 + 4 + payload.size() + 4);
  uint64_t len;
  std::memcpy(&len, r.data(), 8);
  EXPECT_EQ(len, payload.size());
  EXPECT_EQ(le32(r, 8), masked_crc32c(r.data(), 8));
  EXPECT_EQ(r.substr(12, payload.size()), payload);
  EXPECT_EQ(le32(r, 12 + payload.size()), masked_crc32c(payload.data(), payload.size()));
}

TEST(TensorBoard, ScalarEventIsTheProtobufOfEventSummaryValue) {
  // Event{wall_time: 2.0, step: 300, summary: {value: [{tag: "a", simple_value: 1.5}]}}, by hand:
  // 09 <double 2.0> | 10 ac 02 (300 as a varint) | 2a 0a (Summary, 10 bytes) | 0a 08 (Value, 8 bytes) |
  // 0a 01 'a' | 15 <float 1.5>
  const std::string e = event_scalars(2.0, 300, {Scalar{"a", 1.5}});
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0xac, 0x02, 0x2a, 0x0a, 0x0a, 0x08, 0x0a,
                                      0x01, 'a', 0x15, 0x00, 0x00, 0xc0, 0x3f});
  EXPECT_EQ(e, expected);
  // file_version = 3 after the wall time, no step (proto3 leaves 0 out); SessionLog START under field 7.
  EXPECT_EQ(event_file_version(2.0).substr(9), bytes({0x1a, 13}) + "brain.Event:2");
  EXPECT_EQ(event_session_start(2.0, 5).substr(9), bytes({0x10, 0x05, 0x3a, 0x02, 0x08, 0x01}));
}

TEST(TensorBoard, RecordsMapToTagsOnlyForTheNumbersTheyHold) {
  const Json step{{"event", "step"}, {"step", 20}, {"loss", 0.5}, {"lr", 0.001}, {"grad_norm", 1.0},
                  {"sequences_per_second", 100.0}, {"timesteps_per_second", 9000.0}};
  const std::vector<Scalar> s = tensorboard_scalars(step);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].tag, "train/loss");
  EXPECT_EQ(s[0].value, 0.5);
  EXPECT_EQ(s[3].tag, "throughput/sequences_per_second");
  Json all_skipped = step;
  all_skipped["loss"] = nullptr;   // NaN becomes null in JSON: no point for it
  EXPECT_EQ(tensorboard_scalars(all_skipped).size(), 4u);
  const Json epoch{{"event", "epoch"}, {"step", 100}, {"train_loss", 1.0}, {"val_loss", 2.0}, {"val_mae", 0.3},
                   {"sequences_per_second", 5.0}};
  EXPECT_EQ(tensorboard_scalars(epoch).size(), 4u);
  EXPECT_TRUE(tensorboard_scalars(Json{{"event", "checkpoint"}, {"step", 3}}).empty());
}

TEST(RunRecords, EpochCsvColumnsFollowTaskAndValidation) {
  EXPECT_EQ(epoch_csv_header(epoch_csv_columns(true, true)),
            "epoch,step,train_loss,train_accuracy,val_loss,val_accuracy,lr,sequences_per_second,elapsed\n");
  EXPECT_EQ(epoch_csv_header(epoch_csv_columns(false, true)),
            "epoch,step,train_loss,val_loss,val_mae,lr,sequences_per_second,elapsed\n");
  EXPECT_EQ(epoch_csv_header(epoch_csv_columns(true, false)),
            "epoch,step,train_loss,train_accuracy,lr,sequences_per_second,elapsed\n");
  const Json rec{{"event", "epoch"}, {"epoch", 2}, {"step", 40}, {"train_loss", 0.25}, {"train_accuracy", nullptr},
                 {"lr", 0.001}, {"sequences_per_second", 1234.5}, {"elapsed", 3.5}};
  EXPECT_EQ(epoch_csv_row(rec, epoch_csv_columns(true, false)), "2,40,0.25,,0.001,1234.5,3.5\n");
}

TEST(RunRecords, EveryRecordCarriesTimeAndElapsedAndEpochsBecomeCsvRows) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ragtrain_unit_records_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    RunRecords r;
    RunRecordsSpec spec;
    spec.dir = dir.string();
    spec.classification = true;
    spec.host = "h";
    EXPECT_EQ(r.open(spec), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r.write(Json{{"event", "step"}, {"step", 1}, {"loss", 1.0}});
    r.write(Json{{"event", "epoch"}, {"epoch", 1}, {"step", 2}, {"train_loss", 0.5}, {"train_accuracy", 0.75},
                 {"lr", 0.1}, {"sequences_per_second", 10.0}});
  }
  std::ifstream jl(dir / "metrics.jsonl");
  std::string line;
  double last = 0;
  int n = 0;
  const std::regex iso("20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z");
  while (std::getline(jl, line)) {
    const Json rec = Json::parse(line);
    ASSERT_TRUE(rec.contains("time") && rec.contains("elapsed")) << line;
    EXPECT_TRUE(std::regex_match(rec["time"].get<std::string>(), iso)) << rec["time"];
    EXPECT_GE(rec["elapsed"].get<double>(), 0.02);   // the clock started with the RunRecords, before the sleep
    EXPECT_GE(rec["elapsed"].get<double>(), last);
    last = rec["elapsed"].get<double>();
    ++n;
  }
  EXPECT_EQ(n, 2);
  std::ifstream csv(dir / "metrics.csv");
  std::string header, row, extra;
  std::getline(csv, header);
  std::getline(csv, row);
  EXPECT_EQ(header, "epoch,step,train_loss,train_accuracy,lr,sequences_per_second,elapsed");
  EXPECT_EQ(row.rfind("1,2,0.5,0.75,0.1,10,", 0), 0u) << row;
  EXPECT_FALSE(std::getline(csv, extra));
  int event_files = 0;
  for (const auto& e : fs::directory_iterator(dir))
    event_files += e.path().filename().string().rfind(kEventFilePrefix, 0) == 0;
  EXPECT_EQ(event_files, 1);
  fs::remove_all(dir);
}

TEST(RunRecords, UtcTimeHasMilliseconds) {
  using namespace std::chrono;
  const system_clock::time_point t = system_clock::time_point(milliseconds(1764772267042LL));
  EXPECT_EQ(utc_time_ms(t), "2025-12-03T14:31:07.042Z");
}

TEST(Timeline, RecordsNestedPhasesAndStopsAtItsCap) {
  Timeline t(true, 3);
  {
    PhaseScope outer(&t, Phase::Validation, 7);
    PhaseScope inner(&t, Phase::Checkpoint, 7);
  }
  {
    PhaseScope a(&t, Phase::Compute, 8);
  }
  {
    PhaseScope b(&t, Phase::AllreduceWait, 8);   // the fourth interval: over the cap
  }
  ASSERT_EQ(t.events().size(), 3u);
  // The inner phase ends first, and lies within the outer one.
  EXPECT_EQ(t.events()[0].phase, Phase::Checkpoint);
  EXPECT_EQ(t.events()[1].phase, Phase::Validation);
  EXPECT_GE(t.events()[0].begin_us, t.events()[1].begin_us);
  EXPECT_LE(t.events()[0].begin_us + t.events()[0].dur_us, t.events()[1].begin_us + t.events()[1].dur_us);
  EXPECT_EQ(t.events()[2].step, 8);
  EXPECT_TRUE(t.truncated());
  EXPECT_EQ(t.dropped(), 1);
  EXPECT_EQ(t.first_dropped_step(), 8);
  EXPECT_STREQ(phase_name(Phase::AllreduceWait), "allreduce_wait");
  EXPECT_STREQ(phase_category(Phase::ReadShard), "setup");
}

TEST(Timeline, OffRecordsNothing) {
  Timeline t(false);
  {
    PhaseScope a(&t, Phase::Compute, 1);
  }
  EXPECT_TRUE(t.events().empty());
  EXPECT_FALSE(t.truncated());
}

// Background threads record their spans on the side track while the main thread records its phases: no event is
// lost or torn, each thread's spans are where it put them, and the main thread's list holds only its own.
TEST(Timeline, SideSpansFromOtherThreadsGoToTheirOwnTrack) {
  Timeline t(true);
  std::vector<std::thread> readers;
  for (int k = 0; k < 4; ++k)
    readers.emplace_back([&t, k] {
      for (int i = 0; i < 500; ++i) SideSpan span(&t, Phase::WindowRead, 1000 * k + i);
    });
  for (int i = 0; i < 500; ++i) PhaseScope phase(&t, Phase::Compute, i + 1);
  for (std::thread& r : readers) r.join();
  ASSERT_EQ(t.events().size(), 500u);
  for (const TraceEvent& e : t.events()) EXPECT_EQ(e.phase, Phase::Compute);
  const std::vector<TraceEvent> side = t.side_events();
  ASSERT_EQ(side.size(), 2000u);
  std::vector<int> next(4, 0);   // each thread's spans in its own order
  for (const TraceEvent& e : side) {
    EXPECT_EQ(e.phase, Phase::WindowRead);
    EXPECT_GE(e.dur_us, 0.0);
    const auto k = static_cast<size_t>(e.step / 1000);
    ASSERT_LT(k, 4u);
    EXPECT_EQ(e.step % 1000, next[k]++);
  }
  EXPECT_FALSE(t.truncated());
  EXPECT_STREQ(phase_name(Phase::WindowRead), "window_read");
  EXPECT_STREQ(phase_category(Phase::WindowRead), "reader");
  EXPECT_STREQ(phase_name(Phase::ShardLoad), "shard_load");
  EXPECT_STREQ(phase_category(Phase::ShardLoad), "reader");

  Timeline capped(true, 3);   // the side track has the same cap, and says what it left out
  for (int i = 0; i < 5; ++i) SideSpan span(&capped, Phase::WindowRead, i + 1);
  EXPECT_EQ(capped.side_events().size(), 3u);
  EXPECT_EQ(capped.dropped(), 2);

  Timeline off(false);   // without --trace: nothing kept
  std::thread([&off] { SideSpan span(&off, Phase::WindowRead, 1); }).join();
  EXPECT_TRUE(off.side_events().empty());
}

TEST(Compare, RowsShowTheOptionsThatDiffer) {
  auto run = [](const std::string& name, const std::string& config, double best_acc) {
    Json s{{"world_size", 2}, {"config", config}, {"best_epoch", 3}, {"best_val_loss", 0.5},
           {"best_val_accuracy", best_acc}, {"val_loss", 0.6}, {"val_accuracy", 0.7}, {"train_loss", 0.4},
           {"steps", 30}, {"sequences_per_second", 1000.0}, {"wall_seconds", 2.5}, {"valid", true}};
    return RunSummary{name, {}, s, ""};
  };
  std::vector<RunSummary> runs = {run("a", "", 0.9), run("b", "", 0.8)};
  runs[0].options = {{"hidden", "8"}, {"lr", "0.001"}};
  runs[1].options = {{"hidden", "16"}, {"lr", "0.001"}, {"dropout", "0.1"}};
  const Comparison c = compare_runs(runs);
  EXPECT_EQ(c.differing, (std::vector<std::string>{"dropout", "hidden"}));
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0]["options"]["dropout"], "-");
  EXPECT_EQ(c.rows[1]["options"]["hidden"], "16");
  EXPECT_EQ(c.rows[0]["best_val_accuracy"], 0.9);
  const std::string csv = comparison_csv(c);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "run,ranks,dropout,hidden,best_epoch,best_val_loss,best_val_accuracy,last_val_loss,last_val_accuracy,"
            "train_loss,steps,sequences_per_second,wall_seconds,valid,status");
  EXPECT_NE(csv.find("\nb,2,0.1,16,3,0.5,0.8,0.6,0.7,0.4,30,1000,2.5,true,finished\n"), std::string::npos) << csv;
  const std::string table = comparison_table(c);
  EXPECT_NE(table.find("dropout=- hidden=8"), std::string::npos) << table;
  EXPECT_NE(table.find("dropout=0.1 hidden=16"), std::string::npos) << table;
  EXPECT_EQ(comparison_json(c)["differing_options"].size(), 2u);
}

TEST(Compare, OneFileRelativeOrAbsoluteIsOneValueAndRecordKeepingIsLeftOut) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ragtrain_compare_" + std::to_string(::getpid()));
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  // Run a started in `dir` with relative paths, run b with absolute ones; they differ in --quiet and --resume only.
  const auto summary = [&](const std::string& run, const std::string& config) {
    Json s{{"world_size", 1}, {"config", config}, {"provenance", Json{{"working_directory", dir.string()}}}};
    std::ofstream(dir / run / "summary.json") << s.dump();
  };
  summary("a", "# ragtrain train\ndata = t.h5\nval = ./sub/../v.h5\nquiet = false\nhidden = 8\n");
  summary("b", "# ragtrain train\ndata = " + (dir / "t.h5").string() + "\nval = " + (dir / "v.h5").string() +
                   "\nquiet = true\nresume = x\nhidden = 8\n");
  const std::vector<RunSummary> runs = {read_run_summary((dir / "a").string()), read_run_summary((dir / "b").string())};
  EXPECT_EQ(runs[0].options.at("data"), (dir / "t.h5").string());
  EXPECT_EQ(runs[0].options.at("val"), (dir / "v.h5").string());
  EXPECT_EQ(compare_runs(runs, {"quiet", "resume"}).differing, std::vector<std::string>{});
  EXPECT_EQ(compare_runs(runs).differing, (std::vector<std::string>{"quiet", "resume"}));
  fs::remove_all(dir);
}
