# Sourced by the device install scripts (fa4_install.sh, peers_install.sh, stage_all.sh,
# cp_sweep.sh): offline wheel installs on a machine without network.

# NAME.whl.part00, .part01, ... (split to fit a call's carry limit) -> NAME.whl
join_split_wheels() {
    local part
    for part in "$1"/*.whl.part00; do
        [ -e "$part" ] || continue
        cat "${part%.part00}".part* > "${part%.part00}" && rm -f "${part%.part00}".part*
    done
}

# every wheel of DIR into PREFIX, no index, no dependency resolution (each wheel is carried);
# --upgrade: pip --target without it silently keeps an older tree
install_wheels() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$2" "$1"/*.whl
}
