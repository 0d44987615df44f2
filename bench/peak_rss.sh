# Sourced by the bench scripts that report daemons' memory (sparse_click.sh, many_ids.sh).
# peak_rss_json LAUNCHER_PID: samples the peak RSS (VmHWM) of every child of the psrun process
# LAUNCHER_PID every 0.5 s until it exits, then prints them as one JSON object of MB by daemon,
# {"psd-0": MB, "workerd-1": MB, ...} (a child never seen after its exec keeps its pid as name).
# The caller then waits for LAUNCHER_PID itself to read its exit status.
peak_rss_json() {
    local launcher=$1 pid hwm n rss=""
    local -A peak name
    while kill -0 "$launcher" 2>/dev/null; do
        for pid in $(ps -o pid= --ppid "$launcher"); do
            hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
            [ -n "$hwm" ] || continue
            n=$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -Eo '(psd|workerd) --index [0-9]+' |
                awk '{print $1 "-" $NF}')
            [ -n "$n" ] && name[$pid]=$n  # (a child seen before its exec still shows psrun's command line)
            [ "${peak[$pid]:-0}" -lt "$hwm" ] && peak[$pid]=$hwm
        done
        sleep 0.5
    done
    for pid in "${!peak[@]}"; do rss+="\"${name[$pid]:-$pid}\": $((peak[$pid] / 1024)), "; done
    echo "{${rss%, }}"
}
