#!/bin/bash
# Usage: hack/bench-warm/table.sh OUT/rows.jsonl
# Renders the rows hack/bench-warm/run.sh wrote as one Markdown table against issue 30's targets.
set -eu
jq -rs '
  def ms: if . == null then "–" else (. * 1000 | if . < 10 then (. * 10 | round / 10) else round end | tostring) end;
  def pp(s): if s == null or s.n == 0 then "–" else "\(s.p50Seconds | ms) / \(s.p99Seconds | ms)" end;
  def pct: if . == null then "–" else (. * 100 | round | tostring) + "%" end;
  def num(d): if . == null then "–" else (. * pow(10; d) | round / pow(10; d) | tostring) end;
  def load: "\(.loadStart // "–") / \(.loadEnd // "–")";
  def met:
    if .error then "failed"
    elif .row == "a" and .runtime == "gvisor" then (if .first.p50Seconds <= 0.040 and .first.p99Seconds <= 0.150 then "yes" else "no" end)
    elif .row == "b-stream" then (if .warmAfter10 == 1 then "yes" else "no" end)
    elif .row == "d" then (if .pssMiBPerMember <= 32 then "yes" else "no" end)
    elif .row == "e" then (if .writesPerClaim <= 10 then "yes" else "no" end)
    else "–" end;
  def scale:
    if .error then "–"
    elif .row == "b-fill" then "\(.members) members from an empty pool"
    elif .row == "d" then "\(.members) members, \(.processes) host processes"
    elif .row == "e" then "\(.count) claims at 2/s"
    elif .count then "\(.count) creates at \(.rate)/s, pool \(.pool // "of default/base")"
    else "–" end;
  def cpu:
    if .cpuPerCreate == null then ""
    else "; node CPU per create \(.cpuPerCreate.busy | ms) ms: " + ([.cpuPerCreate.components | to_entries | sort_by(-.value) | .[:4][] | "\(.key) \(.value | ms)"] | join(", ")) end;
  def other:
    if .error then .error
    elif .row == "b-fill" then "\(.perSecond) members/s (\(.perCore | num(2))/core), \(.members) Ready in \(.seconds | num(1)) s"
    elif .row == "d" then "PSS \(.pssMiBPerMember | num(1)) MiB, RSS \(.rssMiBPerMember | num(1)) MiB, CPU \(.cpuMillicoresPerMember | num(2)) m per member; requests cpu \(.requests.cpu | join(",")), memory \(.requests.memory | join(",")); filled in \(.fillSeconds | num(0)) s"
    elif .row == "e" then "refill \(if .refillComplete then "complete" else "NOT complete" end) after \(.refillSeconds | num(1)) s"
    elif .created != null then "\(.created) of \(.count) answered\(if (.problems // []) | length > 0 then "; " + (.problems | join("; ")) else "" end)\(cpu)"
    else "" end;
  "| row | runtime | scale | create p50 / p99 (ms) | first command p50 / p99 (ms) | served warm | API writes per claim | load 1-min start / end | other | target | met? |",
  "|---|---|---|---|---|---|---|---|---|---|---|",
  (.[] | "| \(.row) | \(.runtime) | \(scale) | \(pp(.create)) | \(pp(.first)) | \(if .row == "b-stream" then "\(.warm) of \(.count); after 10 s: \(.warmAfter10 | pct)" elif .warm != null then "\(.warm) of \(.count)" else "–" end) | \(.writesPerClaim | num(1)) | \(load) | \(other) | \(.target // "(measured)") | \(met) |")
' "$1"
