#!/usr/bin/env python3
"""A kernel's SASS (bench/sass.sh's listing) by region, and the loops of two listings compared.

  sass_regions.py LISTING KERNEL            the kernel's phase marks (clock reads), barriers, grid-dependency
                                            instructions and exits, with the instructions between them, then its
                                            loops of 40 instructions or more
  sass_regions.py LISTING KERNEL OTHER[:KERNEL2]
                                            also the loops that hold a block barrier (the recurrences' steps), in
                                            address order, against OTHER's (of KERNEL2 there, default KERNEL):
                                            identical; the same instructions with other registers or parameter
                                            offsets; or how many lines differ with those renamed away, and how many
                                            opcodes in the sequence

KERNEL is a substring of the mangled name (e.g. fused_lstm_kernelILi52 for H = 49..52), or of a function that a
kernel calls without inlining it (e.g. backward_phaseILi52: its code follows the kernel's). A region's count is its
static size, not what runs: loops and skipped branches count once (doc/performance.md, "Session 16", says what the
counts were used for).
"""
import difflib
import re
import sys

INS = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^(\.L_x_\d+):")
BRANCH = re.compile(r"BRA.*`\((\.L_x_\d+)\)")


def kernel(path, name):
    """[(address, text)] of the first kernel whose section name holds `name` (or called function: its label is
    "$kernel$function:"), and its labels' addresses."""
    ins, pending, labels, on = [], [], {}, False
    for line in open(path):
        function = line.startswith("$") and line.rstrip().endswith(":")
        if line.startswith(".text.") or function:
            if on:
                break
            on = name in (line.split("$")[-1] if function else line)
            continue
        if not on:
            continue
        if ins and line.lstrip().startswith(".type"):   # the out-of-line helpers (division's slow paths) after it
            break
        m = INS.match(line)
        if m:
            addr = int(m.group(1), 16)
            for lab in pending:
                labels[lab] = addr
            pending = []
            ins.append((addr, m.group(2)))
            continue
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
    if not ins:
        sys.exit(f"sass_regions.py: no kernel matching {name!r} in {path}")
    return ins, labels


def loops(ins, labels, least=40):
    """(start, end) of each backward branch's body of `least` instructions or more, largest first. (Branches back
    from the out-of-line paths of divergent shuffles, placed after the kernel's exits, are not loops.)"""
    found = []
    exits = [addr for addr, text in ins if "EXIT" in text or text.startswith("RET")]   # a function ends in RET
    for addr, text in ins:
        m = BRANCH.search(text)
        if m and m.group(1) in labels and labels[m.group(1)] <= addr:
            start = labels[m.group(1)]
            if (addr - start) // 16 + 1 >= least and not any(start <= x <= addr for x in exits):
                found.append((start, addr))
    return sorted(found, key=lambda se: se[0] - se[1])


def body(ins, start, end, rename):
    out = []
    for addr, text in ins:
        if start <= addr <= end:
            text = re.sub(r"\.L_x_\d+", "L", text)
            if rename:
                text = re.sub(r"\bU?R\d+\b", "R", re.sub(r"\bU?P\d\b", "P", text))
                text = re.sub(r"c\[0x0\]\[0x[0-9a-f]+\]", "c[K]", text)
            out.append(text)
    return out


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    ins, labels = kernel(sys.argv[1], sys.argv[2])
    print(f"{len(ins)} instructions, {ins[-1][0] + 16} bytes")
    prev = 0
    for addr, text in ins:
        if any(k in text for k in ("SR_CLOCKLO", "BAR.", "ACQBULK", "PREEXIT", "EXIT", "CALL")):
            print(f"  {addr:6x}  +{(addr - prev) // 16:5d}  {text[:90]}")
            prev = addr
    mine = loops(ins, labels)
    print("loops (largest first): start..branch, instructions")
    for start, end in mine:
        print(f"  {start:6x}..{end:6x}  {(end - start) // 16 + 1:5d}")
    if len(sys.argv) == 4:
        other_path, _, other_name = sys.argv[3].partition(":")
        other, olabels = kernel(other_path, other_name or sys.argv[2])
        def stepping(code, found):   # loops with a block barrier, in address order
            return sorted((s, e) for s, e in found if any("BAR.SYNC" in t for a, t in code if s <= a <= e))
        mine, theirs = stepping(ins, mine), stepping(other, loops(other, olabels))
        print(f"loops with a barrier against {sys.argv[3]} ({len(mine)} / {len(theirs)}):")
        for rank, ((s, e), (os_, oe)) in enumerate(zip(mine, theirs)):
            exact = [body(ins, s, e, False), body(other, os_, oe, False)]
            named = [body(ins, s, e, True), body(other, os_, oe, True)]   # registers and constants renamed away
            ops = [[t.split()[1] if t.startswith("@") else t.split()[0] for t in side] for side in exact]
            if exact[0] == exact[1]:
                verdict = "identical"
            elif named[0] == named[1]:
                verdict = "the same instructions in the same order, other registers or constants"
            else:
                d_named = sum(1 for x in difflib.ndiff(*named) if x[:1] in "+-")
                d_ops = sum(1 for x in difflib.ndiff(*ops) if x[:1] in "+-")
                verdict = (f"differs: {d_named} lines with registers renamed away, {d_ops} in the opcode sequence"
                           + (" (same opcodes, other operands or order of operands)" if d_ops == 0 else ""))
            print(f"  loop {rank} ({len(exact[0])} / {len(exact[1])} instructions): {verdict}")


if __name__ == "__main__":
    main()
