#!/bin/sh
# make induction: an induction head forming on real text, in one command.
#
# Trains the recipe below on a real text — the King James Bible (TEXT=kjv,
# the default; tools/kjv.sh, Debian's bible-kjv) or the Python standard
# library's modules (TEXT=pystd; tools/pystd.sh) — then measures on the model
# it wrote: the phase-change table (every evaluation: step, validation loss,
# ICL score, best induction and previous-token scores, from train.csv and
# heads.csv), and the causal evidence on the validation text, with `heads`:
#   - the best layer-1 induction head mean-ablated: the loss on the second half
#     of repeated text (ablate --repeat) and the ICL score (ablate);
#   - the best layer-0 previous-token head ablated: the induction head's own
#     score (circuits, ablation_effects.csv), and the K-composition between the
#     two against the random baseline (composition.csv);
#   - with smeared keys a layer-0 head can be an induction head by itself (its
#     key carries the previous token): when the best induction head of any
#     layer is not the layer-1 one, it is mean-ablated too, alone and together
#     with the layer-1 head (causal/repeat0, text0, repeat_both, text_both).
# Usage: tools/induction.sh [OUT] (default out/induction/TEXT), with build/charlm
# and build/heads built (BUILD=DIR for another build); DATA=FILE trains on any
# other text with the same recipe; CHARLM_FLAGS="--steps 300 ..." is appended
# to the recipe (a later flag wins), for trials. A --preset there is applied
# before every other flag, whatever its place, so the recipe's own flags
# (--pos, --no-mlp, --no-layernorm, --lr, --warmup, --schedule) still win over
# it: repeat the preset's values that matter (charlm prints them) in
# CHARLM_FLAGS. Writes OUT/{model.safetensors, train.csv, heads.csv,
# position_loss.csv, heads.png, position_loss.png, report/report.html, causal/,
# phase_change.csv, summary.txt}.
set -eu
cd "$(dirname "$0")/.."
text=${TEXT:-kjv}
case $text in
kjv | pystd) ;;
*) echo "induction.sh: TEXT is kjv or pystd, not $text" >&2; exit 2 ;;
esac
out=${1:-out/induction/$text}
data=${DATA:-out/$text/$text.txt}
build=${BUILD:-build}

# The recipe (docs/studies/2026-11-25-induction-levers.md): the setting of the
# search that came closest, byte-level BPE tokens with rotary positions and
# smeared keys, trained on windows in which a span recurs (--copy-windows: a
# training-data intervention; every measurement reads plain text).
recipe="--layers 2 --heads 8 --d-model 128 --ctx 128 --batch 8 --no-mlp --no-layernorm \
        --tokenizer bpe --vocab 2048 --pos rope --smear --copy-windows 1 \
        --emb-std 1 --lr 3e-3 --warmup 300 --schedule constant --steps 4000 \
        --eval-every 500 --seed 0"

[ -n "${DATA:-}" ] || [ -s "$data" ] || "tools/$text.sh" "$data"
for program in charlm heads; do
    [ -x "$build/$program" ] || { echo "induction.sh: no $build/$program: run make $build/$program" >&2; exit 2; }
done
mkdir -p "$out/causal"
start=$(date +%s)
# shellcheck disable=SC2086
"$build/charlm" --data "$data" $recipe ${CHARLM_FLAGS:-} --sample 200 --out "$out"

# The validation text: the last tenth of the file, as charlm splits it.
size=$(wc -c <"$data")
tail -c $((size / 10)) "$data" >"$out/causal/validation.txt"

# The heads at the last evaluation: the best induction head in layer 1 or
# later (by the probe) and the best previous-token head of layer 0.
last=$(tail -n 1 "$out/heads.csv" | cut -d, -f1)
pick() { # pick LAYER_TEST COLUMN -> "layer.head score"
    awk -F, -v last="$last" -v col="$2" -v test="$1" '
        NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
        $1 == last && ((test == "later" && $2 >= 1) || (test == "first" && $2 == 0) ||
                       test == "any") &&
            (best == "" || $c > score) { best = $2 "." $3; score = $c }
        END { print best, score }' "$out/heads.csv"
}
set -- $(pick later induction)
induction=$1 induction_score=$2
set -- $(pick any induction)
any=$1 any_score=$2
set -- $(pick first previous_token)
previous=$1 previous_score=$2
model="$out/model.safetensors"
valid="$out/causal/validation.txt"
"$build/heads" ablate --model "$model" --data "$valid" --heads "$induction" --repeat \
    --windows 256 --out "$out/causal/repeat" >"$out/causal/repeat.txt"
"$build/heads" ablate --model "$model" --data "$valid" --heads "$induction" --windows 512 \
    --out "$out/causal/text" >"$out/causal/text.txt"
if [ "$any" != "$induction" ]; then
    for what in "0 $any" "_both $any,$induction"; do
        set -- $what
        "$build/heads" ablate --model "$model" --data "$valid" --heads "$2" --repeat \
            --windows 256 --out "$out/causal/repeat$1" >"$out/causal/repeat$1.txt"
        "$build/heads" ablate --model "$model" --data "$valid" --heads "$2" --windows 512 \
            --out "$out/causal/text$1" >"$out/causal/text$1.txt"
    done
fi
"$build/heads" circuits --model "$model" --out "$out/causal/circuits" >"$out/causal/circuits.txt"
seconds=$(($(date +%s) - start))

# The phase-change table: train.csv and heads.csv joined by step.
awk -F, '
    FNR == 1 { for (i = 1; i <= NF; i++) col[FILENAME, $i] = i; next }
    FILENAME ~ /train.csv$/ {
        step[++n] = $1; loss[$1] = $col[FILENAME, "val_loss"]
        icl[$1] = $col[FILENAME, "icl_score"]; iclb[$1] = $col[FILENAME, "icl_score_per_byte"]
        next }
    { s = $1; ind = $col[FILENAME, "induction"]; txt = $col[FILENAME, "induction_text"]
      prev = $col[FILENAME, "previous_token"]
      if ($2 >= 1 && ind > bi[s]) bi[s] = ind
      if ($2 >= 1 && txt > bt[s]) bt[s] = txt
      if ($2 == 0 && ind > b0[s]) b0[s] = ind
      if ($2 == 0 && prev > bp[s]) bp[s] = prev }
    END {
        print "step,val_loss,icl_score,icl_score_per_byte,best_induction,best_induction_text," \
              "best_induction_layer0,best_previous_token"
        for (i = 1; i <= n; i++) { s = step[i]
            printf "%s,%.4f,%.4f,%.4f,%.3f,%.3f,%.3f,%.3f\n", s, loss[s], icl[s], iclb[s],
                   bi[s] + 0, bt[s] + 0, b0[s] + 0, bp[s] + 0 } }' \
    "$out/train.csv" "$out/heads.csv" >"$out/phase_change.csv"

# The causal numbers, from the files just written.
field() { # field FILE HEADS ABLATION COLUMN (nothing when the file has no such column)
    awk -F, -v heads="$2" -v kind="$3" -v name="$4" '
        NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
        c && $1 == heads && $2 == kind { print $c }' "$1"
}
# "A -> B nats/token", and per byte when the tokens are longer than bytes.
change() { # change FILE HEADS COLUMN
    line="$(field "$1" none none "$3") -> $(field "$1" "$2" mean "$3") nats/token"
    if [ -n "$(field "$1" none none "$3_per_byte")" ]; then
        line="$line, $(field "$1" none none "$3_per_byte") -> $(field "$1" "$2" mean "$3_per_byte") nats/byte"
    fi
    echo "  $line"
}
rep="$out/causal/repeat/ablation.csv"
txt="$out/causal/text/ablation.csv"
ind_name="L$(echo "$induction" | tr . H)"
prev_name="L$(echo "$previous" | tr . H)"
k_score=$(awk -F, -v s="$prev_name" -v d="$ind_name" '$1 == "k" && $2 == s && $3 == d { print $4 }' \
    "$out/causal/circuits/composition.csv")
k_base=$(sed -n 's/^random baseline (matrices of the same shapes, mean of 200): //p' \
    "$out/causal/circuits.txt")
# circuits measures each later head by its own main detector (induction for an
# induction head).
effect=$(awk -F, -v s="$prev_name" -v d="$ind_name" '$1 == s && $2 == d {
    print $3 " score on the probe " $4 " -> " $5 }' "$out/causal/circuits/ablation_effects.csv")
{
    echo "induction: the phase change (every evaluation; best induction scores of layer 1 and"
    echo "later and of layer 0, and the best layer-0 previous-token score)"
    if command -v column >/dev/null; then column -s, -t "$out/phase_change.csv"; else
        cat "$out/phase_change.csv"; fi
    echo
    echo "heads at step $last: induction $ind_name (probe $induction_score), previous-token" \
         "$prev_name (probe $previous_score)"
    echo "mean-ablating $ind_name, repeated validation text (second half):"
    change "$rep" "$ind_name" repeat_loss
    echo "  (first half, not predictable from earlier: $(field "$rep" none none first_loss) nats/token)"
    echo "mean-ablating $ind_name, ICL score on validation windows:"
    change "$txt" "$ind_name" icl_score
    echo "zero-ablating $prev_name: $ind_name's $effect"
    echo "K-composition $prev_name -> $ind_name: $k_score (random baseline $k_base)"
    if [ "$any" != "$induction" ]; then
        any_name="L$(echo "$any" | tr . H)" both="$any_name+$ind_name"
        echo "the best induction head of any layer: $any_name (probe $any_score), a one-layer" \
             "induction head when the keys are smeared"
        echo "mean-ablating $any_name, repeated validation text (second half):"
        change "$out/causal/repeat0/ablation.csv" "$any_name" repeat_loss
        echo "mean-ablating $any_name, ICL score on validation windows:"
        change "$out/causal/text0/ablation.csv" "$any_name" icl_score
        echo "mean-ablating $both, repeated validation text (second half):"
        change "$out/causal/repeat_both/ablation.csv" "$both" repeat_loss
        echo "mean-ablating $both, ICL score on validation windows:"
        change "$out/causal/text_both/ablation.csv" "$both" icl_score
    fi
    echo "wall time: $seconds s (training, report and measurements)"
} | tee "$out/summary.txt"
