# Sourced by bin/setup.sh and bin/setup_clients.sh: finding a Python of a given version on this machine,
# each candidate tried for real (a pyenv shim is on PATH even when it cannot run; Debian's python3 has no
# ensurepip until python3.X-venv is installed).

# "3.11" for a Python that runs, nothing (and failure) otherwise.
python_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

# The interpreter itself (a pyenv shim or a symlink on PATH resolved to what it runs).
python_executable() { "$1" -c 'import sys; print(sys.executable)' 2>/dev/null; }

# A virtual environment made by this Python gets pip: venv and ensurepip with its bundled pip are there
# (Debian's python3 has them only with python3.X-venv).
venv_works() { "$1" -c 'import venv, ensurepip; ensurepip.version()' >/dev/null 2>&1; }

# The Debian package python3.X-<suffix> (venv, dev) for a Python that Debian's packages installed, else nothing.
debian_python_package() {
    local version
    version="$(python_version "$1")" || return 1
    command -v dpkg >/dev/null && dpkg -S "$(readlink -f "$1")" >/dev/null 2>&1 || return 1
    echo "python$version-$2"
}

# pyenv's interpreters of the given versions (e.g. 3.11 3.10), newest first within each version.
pyenv_pythons() {
    local root version
    root="$( (command -v pyenv >/dev/null && pyenv root 2>/dev/null) || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
    for version in "$@"; do
        ls -d "$root"/versions/"$version".*/bin/python"$version" 2>/dev/null | sort -rV
    done
}
