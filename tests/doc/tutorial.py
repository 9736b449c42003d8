#!/usr/bin/env python3
"""doc/tutorial.md run as written, its printed output compared with what the commands print now.

Every fenced block of the page whose first line starts with "$ " is a shell session: each "$ CMD" line is run with
bash in one scratch folder (which has the source tree's inputs/ and jobs/ and the build as build/), in page order,
and the lines after it, up to the next "$ " line, are what it printed (stdout and stderr). A block is skipped only
when the line before its fence is "<!-- tutorial test: not run (REASON) -->"; the page says so in words too.

How a printed line is compared (CHECKS below, stated on the page under "How this page is tested"):
- a line "..." in the page stands for any number of lines (none included);
- words must be equal; numbers must agree within 0.5% or one unit in the page's last printed digit, whichever is
  larger (the CPU backend is deterministic on one machine; the margin covers another CPU's float rounding);
- what measures time or speed (ms and s, seq/s, step/s, ETA, the result table's seq/s, timesteps/s and wall_s
  columns, the per-rank seconds table) and the name of a TensorBoard file are not compared.
Every command must exit with 0. Standard library only: runs with any python3.
usage: tests/doc/tutorial.py BUILD_DIR [--keep DIR]   prints "[  PASSED  ]"/"[  FAILED  ]" per command, then
"N passed, N failed, N skipped"; exit 0 when none failed. --keep DIR: run there and keep it (for updating the page).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "doc", "tutorial.md")
SKIP_MARK = re.compile(r"^<!-- tutorial test: not run \((.+)\) -->$")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
REL_TOL = 0.005
# Timings and file names that differ from run to run: replaced by "~" on both sides before comparing.
VARYING = [
    (re.compile(r"events\.out\.tfevents\.\S*"), "events.out.tfevents.~"),
    (re.compile(r"[\d.]+ (?:[kM] )?(seq/s|step/s)"), r"~ \1"),
    (re.compile(r"ETA [\d.]+ ?(?:ms|s|min|h)"), "ETA ~"),
    # the progress line names the loop's wait for data once it reaches 1% of an interval: a matter of machine load
    (re.compile(r"\s+io wait \d+%"), ""),
    (re.compile(r"\((?:[\d.]+ ?(?:ms|s|min))\)$"), "(~)"),
    # the result table's row: ranks, epochs, steps, losses and accuracy are compared; seq/s, timesteps/s, wall_s not
    (re.compile(r"^(#\s+(?:cpu|cuda)\s+(?:\S+\s+){5}\S+)\s+\S+\s+\S+\s+\S+$"), r"\1 ~ ~ ~"),
    (re.compile(r"^(#\s+(?:compute|comm wait|io))\s+.*$"), r"\1 ~"),
]


def normalise(line):
    line = line.rstrip()
    for pattern, repl in VARYING:
        line = pattern.sub(repl, line)
    return line


def numbers_agree(page, now):
    a, b = float(page), float(now)
    decimals = len(page.split(".")[1].split("e")[0].split("E")[0]) if "." in page else 0
    unit = 10.0 ** -decimals
    if "e" in page.lower():   # 1.5e-03: a unit of the mantissa's last digit
        unit *= 10.0 ** int(page.lower().split("e")[1])
    return abs(a - b) <= max(unit, REL_TOL * abs(a)) * (1 + 1e-9)


def lines_agree(page, now):
    page, now = normalise(page), normalise(now)
    p_words, n_words = NUMBER.split(page), NUMBER.split(now)
    p_nums, n_nums = NUMBER.findall(page), NUMBER.findall(now)
    if len(p_nums) != len(n_nums) or [w.split() for w in p_words] != [w.split() for w in n_words]:
        return False
    return all(numbers_agree(p, n) for p, n in zip(p_nums, n_nums))


def matches(page, now):
    """Whether the printed lines `now` match the page's lines, where a "..." line stands for any lines."""
    memo = {}

    def at(i, j):
        if (i, j) in memo:
            return memo[i, j]
        if i == len(page):
            ok = j == len(now)
        elif page[i].strip() == "...":
            ok = at(i + 1, j) or (j < len(now) and at(i, j + 1))
        else:
            ok = j < len(now) and lines_agree(page[i], now[j]) and at(i + 1, j + 1)
        memo[i, j] = ok
        return ok

    sys.setrecursionlimit(100000)
    return at(0, 0)


def first_difference(page, now):
    """The first page line that finds no counterpart, for the failure message (greedy, good enough to point)."""
    j = 0
    for line in page:
        if line.strip() == "...":
            continue
        k = next((k for k in range(j, len(now)) if lines_agree(line, now[k])), None)
        if k is None:
            near = now[j] if j < len(now) else "(no more lines)"
            return f"page: {line!r}\n    now:  {near!r}"
        j = k + 1
    return "the lines after the page's last one" if j < len(now) else "(order)"


def comparison_can_fail():
    """The comparison itself: a changed loss, accuracy or count must fail it, a changed time must not."""
    page = ["epoch 1/3 done: train loss 0.3479 acc 0.9270  val loss 0.0062 acc 1.0000  (866 ms)",
            "...", "accuracy 0.9730 (360/370)"]
    same = ["epoch 1/3 done: train loss 0.3479 acc 0.9270  val loss 0.0062 acc 1.0000  (2.5 s)",
            "loss 0.145424", "accuracy 0.9730 (360/370)"]
    drifted = [[same[0].replace("0.3479", "0.3529"), *same[1:]], [same[0].replace("0.9270", "0.9170"), *same[1:]],
               [*same[:2], "accuracy 0.9730 (350/370)"], same[:2], same + ["extra"]]
    return matches(page, same) and not any(matches(page, d) for d in drifted)


def sessions(text):
    """(skip reason or None, [(command, [page lines])]) for every fenced block that starts with "$ "."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            if body and body[0].startswith("$ "):
                mark = SKIP_MARK.match(lines[i - 1].strip()) if i > 0 else None
                steps = []
                for line in body:
                    if line.startswith("$ "):
                        steps.append((line[2:], []))
                    else:
                        steps[-1][1].append(line)
                out.append((mark.group(1) if mark else None, steps))
            i = j
        i += 1
    return out


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    with open(PAGE, encoding="utf-8") as f:
        blocks = sessions(f.read())
    n_run = sum(len(steps) for reason, steps in blocks if reason is None)
    # The page as it is today runs gen, inspect, train, eval, convert and predict; fewer means it lost its example.
    if n_run < 12:
        print(f"[  FAILED  ] doc/tutorial.md: {n_run} commands to run (expected >= 12)")
        print("0 passed, 1 failed, 0 skipped")
        return 1
    if not comparison_can_fail():
        print("[  FAILED  ] tests/doc/tutorial.py: its comparison accepts changed numbers or refuses changed times")
        print("0 passed, 1 failed, 0 skipped")
        return 1
    work = keep or tempfile.mkdtemp(prefix="ragtrain-tutorial.")
    os.makedirs(work, exist_ok=True)
    for name, target in (("inputs", os.path.join(ROOT, "inputs")), ("jobs", os.path.join(ROOT, "jobs")),
                         ("build", build)):
        if not os.path.lexists(os.path.join(work, name)):
            os.symlink(target, os.path.join(work, name))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", LC_ALL="C")
    passed = failed = skipped = 0
    try:
        for reason, steps in blocks:
            if reason is not None:
                for command, _ in steps:
                    print(f"[  SKIPPED ] $ {command[:90]}: {reason}")
                skipped += len(steps)
                continue
            for command, page in steps:
                r = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
                now = r.stdout.decode("utf-8", "replace").rstrip("\n")
                now_lines = now.split("\n") if now else []
                while page and page[-1] == "":
                    page = page[:-1]
                label = f"$ {command[:100]}"
                if r.returncode == 0 and matches(page, now_lines):
                    print(f"[  PASSED  ] {label}")
                    passed += 1
                    continue
                print(f"[  FAILED  ] {label}")
                if r.returncode != 0:
                    print(f"    exited with {r.returncode}")
                else:
                    print("    " + first_difference(page, now_lines))
                print("    it printed:\n" + "\n".join("      | " + line for line in now_lines[-60:]))
                failed += 1
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
