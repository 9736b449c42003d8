#!/usr/bin/env python3
"""UCR archive 2018 .tsv (one series per line: label, then values; unequal-length series padded with NaN at the
end) -> sktime/UEA .ts with each series at its own length, which `ragtrain convert` reads.

  ucr_tsv_to_ts.py NAME_TRAIN.tsv NAME_TRAIN.ts --name NAME [--comment-from README.md]

The values are copied as the text tokens they are (no float round trip), so the .ts holds exactly the archive's
numbers. Only trailing NaN padding is removed; a NaN inside a series (a missing value) is an error, because
ragtrain has no missing values. Labels are kept as written and listed in the header in order of first appearance
after sorting numerically when they are all integers.
Needs only the Python standard library.
"""
import argparse
import math
import sys


def read_series(path):
    """[(label, [value tokens])] with the trailing NaN padding removed."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            tokens = line.replace(",", "\t").split()
            label, values = tokens[0], tokens[1:]
            while values and values[-1].lower() == "nan":
                values.pop()
            if not values:
                sys.exit(f"{path}:{lineno}: a series with no values")
            for v in values:
                if v.lower() == "nan" or not math.isfinite(float(v)):
                    sys.exit(f"{path}:{lineno}: a missing value inside the series (not only trailing padding)")
            rows.append((label, values))
    if not rows:
        sys.exit(f"{path}: no series")
    return rows


def class_labels(rows):
    labels = sorted({label for label, _ in rows}, key=lambda s: (float(s), s) if _is_number(s) else (math.inf, s))
    return labels


def _is_number(s):
    try:
        float(s)
        return True
    except ValueError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tsv")
    ap.add_argument("ts")
    ap.add_argument("--name", required=True, help="@problemName")
    ap.add_argument("--classes", help="space-separated class labels for the header (default: those in the file); "
                                      "give the training set's to a test set")
    ap.add_argument("--comment", action="append", default=[], help="a '#' comment line for the header (repeatable)")
    a = ap.parse_args()

    rows = read_series(a.tsv)
    labels = a.classes.split() if a.classes else class_labels(rows)
    unknown = {label for label, _ in rows} - set(labels)
    if unknown:
        sys.exit(f"{a.tsv}: labels {sorted(unknown)} are not among --classes")
    lengths = [len(v) for _, v in rows]
    with open(a.ts, "w", encoding="utf-8", newline="\n") as out:
        for c in a.comment:
            out.write(f"# {c}\n")
        out.write(f"@problemName {a.name}\n@timeStamps false\n@missing false\n@univariate true\n")
        out.write(f"@equalLength {'true' if len(set(lengths)) == 1 else 'false'}\n")
        out.write(f"@classLabel true {' '.join(labels)}\n@data\n")
        for label, values in rows:
            out.write(",".join(values) + ":" + label + "\n")
    print(f"wrote {a.ts}: {len(rows)} series, lengths {min(lengths)}..{max(lengths)}, {len(labels)} classes")


if __name__ == "__main__":
    main()
