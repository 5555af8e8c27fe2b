#!/bin/sh
# tools/bench_table.sh CSV: the mha, toy and gpt rows of a bench.csv (written
# by `make bench`, bench/report.c) as a Markdown table on stdout, for
# docs/performance.md:
#
#   make bench && tools/bench_table.sh bench.csv
#
# Columns are found by their names in the CSV's header, so older files work:
# a CSV without `kernels` (before the kernel sets) or `torch_threads` (before
# PyTorch's thread arrangements were timed) shows "-" there. A PyTorch time
# that was not measured shows its state (absent, failed). Exit status 2 when
# the file cannot be read or is not a bench CSV.
set -eu
if [ $# -ne 1 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
    echo "usage: tools/bench_table.sh BENCH.csv > table.md" >&2
    exit 2
fi
[ -r "$1" ] || { echo "bench_table: cannot read $1" >&2; exit 2; }

awk '
# Splits a CSV line into f[1..n] (double-quoted fields may hold commas; ""
# inside quotes is one quote); returns n.
function split_csv(line, f,    n, i, c, field, quoted) {
    n = 0; field = ""; quoted = 0
    for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (quoted) {
            if (c == "\"" && substr(line, i + 1, 1) == "\"") { field = field "\""; i++ }
            else if (c == "\"") quoted = 0
            else field = field c
        } else if (c == "\"") quoted = 1
        else if (c == ",") { f[++n] = field; field = "" }
        else field = field c
    }
    f[++n] = field
    return n
}
function get(name) { return (name in col) ? row[col[name]] : "" }
function or_dash(v) { return v == "" ? "-" : v }
function ms(v) { return v == "" ? "" : sprintf("%.2f", v) }
{ sub(/\r$/, "") }
NR == 1 {
    n = split_csv($0, h)
    for (i = 1; i <= n; i++) col[h[i]] = i
    split("section case variant threads headlab_ms torch_ms speedup_vs_torch", need, " ")
    for (i in need)
        if (!(need[i] in col)) {
            printf "bench_table: %s: no column %s: not a bench.csv\n", FILENAME, need[i] > "/dev/stderr"
            bad = 1; exit 2
        }
    print "| kernels | section | case | variant | threads | headlab ms | PyTorch ms | PyTorch threads | speed-up |"
    print "| --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: |"
    next
}
{
    split_csv($0, row)
    s = get("section")
    if (s != "mha" && s != "toy" && s != "gpt") next
    pt = ms(get("torch_ms"))
    if (pt == "") pt = or_dash(get("torch"))
    up = get("speedup_vs_torch")
    up = up == "" ? "-" : sprintf("%.2fx", up)
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", or_dash(get("kernels")), s,
        get("case"), get("variant"), get("threads"), or_dash(ms(get("headlab_ms"))), pt,
        or_dash(get("torch_threads")), up
    rows++
}
END {
    if (bad) exit 2
    if (NR == 0) { printf "bench_table: %s is empty\n", FILENAME > "/dev/stderr"; exit 2 }
    if (!rows) print "| (no mha, toy or gpt rows) | | | | | | | | |"
}' "$1"
