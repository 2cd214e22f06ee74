#!/usr/bin/env bash
# Installs what tests/slurm needs to start a one-machine Slurm cluster: Debian's slurm-wlm (slurmctld, slurmd,
# clients), slurmdbd and mariadb-server (submitit reads job states with sacct, which needs accounting), munge.
# Idempotent: does nothing when every program is already there. Starts no daemon (the test starts its own, under
# a temporary folder). Fails loudly, with the reason, where the packages cannot be installed: CI must not pass by
# silently skipping the Slurm test.
set -euo pipefail

PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)
PROGRAMS=(munged munge slurmctld slurmd slurmdbd sinfo sbatch squeue sacct scancel scontrol mariadbd mariadb-install-db)

missing() {
    local out=()
    for p in "${PROGRAMS[@]}"; do
        command -v "$p" >/dev/null 2>&1 || out+=("$p")
    done
    echo "${out[*]:-}"
}

fail() {
    echo "################################################################################" >&2
    echo "## SLURM SETUP FAILED: $*" >&2
    echo "## The Slurm test (pytest -m slurm) cannot run on this machine." >&2
    echo "################################################################################" >&2
    exit 1
}

if [ -z "$(missing)" ]; then
    echo "slurm_setup: slurm, slurmdbd, munge and mariadb already installed (slurm $(dpkg-query -W -f='${Version}' slurmctld))"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "needs root to apt-get install ${PACKAGES[*]} (missing: $(missing))"
command -v apt-get >/dev/null 2>&1 || fail "no apt-get: not a Debian/Ubuntu machine (missing: $(missing))"

# The packages' maintainer scripts would start system-wide daemons; the test starts its own instead.
POLICY=/usr/sbin/policy-rc.d
CREATED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$POLICY"
    chmod +x "$POLICY"
    CREATED_POLICY=1
fi
cleanup() { if [ "$CREATED_POLICY" -eq 1 ]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT

echo "slurm_setup: installing ${PACKAGES[*]} system-wide with apt-get, for the Slurm tests (marker slurm; missing: $(missing))"
echo "slurm_setup: (no daemon is started; run scripts/test.sh as a non-root user to skip the Slurm tests instead)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || fail "apt-get update failed (no network or no package mirror?)"
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/tmp/slurm_setup_apt.log 2>&1 || {
    tail -20 /tmp/slurm_setup_apt.log >&2
    fail "apt-get install ${PACKAGES[*]} failed (log above, full log in /tmp/slurm_setup_apt.log)"
}

[ -z "$(missing)" ] || fail "installed ${PACKAGES[*]} but still missing: $(missing)"
echo "slurm_setup: installed ${PACKAGES[*]} (slurm $(dpkg-query -W -f='${Version}' slurmctld))"
