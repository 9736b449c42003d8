// Compatibility of a checkpoint with the run that wants to continue it.
#include "ragtrain/checkpoint/resume.hpp"

#include <map>
#include <sstream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/metrics/units.hpp"

namespace ragtrain {

const std::vector<std::string>& trajectory_options() {
  static const std::vector<std::string> names = {
      "hidden", "layers", "bidirectional", "pool", "dropout", "head-dropout", "normalize", "optimizer", "lr",
      "momentum", "beta1", "beta2", "eps", "weight-decay", "clip", "warmup-steps", "lr-decay", "lr-final-fraction"};
  return names;
}

namespace {

std::string shape_text(const ModelShape& s) {
  return RT_MSG("F=" << s.input_size << " H=" << s.hidden << " L=" << s.layers << " outputs=" << s.outputs
                     << (s.bidirectional ? " bidirectional" : "") << " pool=" << pool_name(s.pool));
}

}  // namespace

ResumePlan plan_resume(const std::string& path, const Checkpoint& c, const ResumeTarget& target) {
  const RunPosition& t = target.position;
  const std::string pick = "resume with the options of the run that wrote it (stored in the checkpoint's attribute "
                           "config; `h5dump -a config " + path + "`)";
  USER_CHECK(c.resumable,
             "checkpoint '" << path << "' (version " << c.version << ") holds no training position",
             "it can be evaluated, but only checkpoints written by this ragtrain (version " << kCheckpointVersion
                                                                                          << ") can be resumed");
  USER_CHECK(c.shape == target.shape,
             "checkpoint '" << path << "' holds a model of " << shape_text(c.shape) << ", this run builds "
                            << shape_text(target.shape),
             pick);
  // Stored since the rates became options; a checkpoint from before has 0, as the run that wrote it had.
  USER_CHECK(c.dropout.between == target.dropout.between && c.dropout.head == target.dropout.head,
             "checkpoint '" << path << "' was written with --dropout " << c.dropout.between << " --head-dropout "
                            << c.dropout.head << ", this run has --dropout " << target.dropout.between
                            << " --head-dropout " << target.dropout.head,
             "other dropout rates would not continue the same run; " << pick);
  const RunPosition& p = c.position;
  USER_CHECK(p.data_sequences == t.data_sequences && p.data_lengths_crc32 == t.data_lengths_crc32,
             "checkpoint '" << path << "' was trained on a data set of " << p.data_sequences
                            << " sequences (lengths CRC-32 " << p.data_lengths_crc32 << "), --data has "
                            << t.data_sequences << " (lengths CRC-32 " << t.data_lengths_crc32 << ")",
             "resume on the same training file");

  // Options that change the trajectory, compared as the effective configuration prints them.
  std::map<std::string, std::string> before, now;
  for (auto& [k, v] : parse_effective_config(c.config)) before[k] = v;
  for (auto& [k, v] : parse_effective_config(target.effective_config)) now[k] = v;
  // --normalize was a switch before it had modes: its `true` / `false` are `feature` / `none` now.
  for (auto* m : {&before, &now}) {
    const auto it = m->find("normalize");
    if (it != m->end() && (it->second == "true" || it->second == "false"))
      it->second = it->second == "true" ? "feature" : "none";
  }
  for (const std::string& name : trajectory_options()) {
    const auto b = before.find(name), n = now.find(name);
    if (b == before.end() || n == now.end()) continue;   // an option this ragtrain or that one did not have
    USER_CHECK(b->second == n->second,
               "checkpoint '" << path << "' was written with --" << name << " " << b->second << ", this run has --"
                              << name << " " << n->second,
               "a different --" << name << " would not continue the same run; " << pick);
  }
  USER_CHECK(p.seed == t.seed, "checkpoint '" << path << "' was written with --seed " << p.seed << ", this run has --seed "
                                              << t.seed, pick);
  USER_CHECK(p.schedule == t.schedule, "checkpoint '" << path << "' was written with --schedule " << p.schedule
                                                      << ", this run has --schedule " << t.schedule, pick);

  const int64_t g = t.world_size * t.batch_per_rank;
  std::ostringstream how;
  if (p.global_batch % t.world_size == 0)
    how << "with " << count_of(t.world_size, "rank") << " use --batch-per-rank " << p.global_batch / t.world_size;
  else
    how << "start " << count_of(p.global_batch, "rank") << " with --batch-per-rank 1, or a divisor of "
        << count_of(p.global_batch, "rank");
  USER_CHECK(g == p.global_batch,
             "checkpoint '" << path << "' was written with a global batch of " << p.global_batch << " ("
                            << count_of(p.world_size, "rank") << " x " << p.batch_per_rank << " per rank); this run has " << g
                            << " (" << t.world_size << " x " << t.batch_per_rank << ")",
             "the global batch decides which sequences meet in a step, so it must stay the same; " << how.str());
  RT_CHECK(p.steps_per_epoch == t.steps_per_epoch, "same N and G must give the same steps per epoch");

  ResumePlan plan;
  plan.step = c.step;
  plan.epoch = c.step / t.steps_per_epoch;
  plan.step_in_epoch = c.step % t.steps_per_epoch;
  const int64_t total = t.epochs * t.steps_per_epoch;
  USER_CHECK(c.step <= total,
             "checkpoint '" << path << "' is at step " << c.step << " (epoch " << c.epoch << "), beyond this run's "
                            << total << " steps (--epochs " << t.epochs << ")",
             "raise --epochs to at least " << (c.step + t.steps_per_epoch - 1) / t.steps_per_epoch);
  plan.finished = c.step == total;
  plan.layout_changed = p.world_size != t.world_size;

  std::ostringstream m;
  m << "# resuming from " << path << ": step " << c.step << " of " << total << " (epoch " << plan.epoch + 1
    << ", step " << plan.step_in_epoch << " of " << t.steps_per_epoch << " done)";
  if (plan.layout_changed)
    m << "\n# rank layout changed: the checkpoint was written by " << count_of(p.world_size, "rank") << " x " << p.batch_per_rank
      << " per rank, this run has " << t.world_size << " x " << t.batch_per_rank << "; the global batch ("
      << g << ") and so every global step's sequences are the same; gradient sums are added in another order, "
      << "so the numbers agree to float rounding, not bit for bit";
  if (p.epochs != t.epochs) {
    m << "\n# --epochs changed from " << p.epochs << " to " << t.epochs;
    if (before.count("lr-decay") && before["lr-decay"] != "none")
      m << ": the learning-rate decay now ends at the new last step";
  }
  plan.message = m.str();
  return plan;
}

}  // namespace ragtrain
