#!/usr/bin/env bash
# Container entrypoint: make the environment usable for whichever user the container runs as, then run the command
# (default: snakemake --cores 4) in the repository's working directory.
set -euo pipefail

# `docker run --user 1234:1234` (or Apptainer, which keeps the host user) may leave HOME unwritable: move HOME and
# every cache to a writable place so torch, matplotlib and snakemake can write their caches.
if ! { mkdir -p "${HOME:-/nonexistent}/.cache" && [ -w "$HOME/.cache" ]; } 2>/dev/null; then
  export HOME="${TMPDIR:-/tmp}/hot-home-$(id -u)"
  mkdir -p "$HOME/.cache"
fi
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}"
[ -w "$XDG_CACHE_HOME" ] 2>/dev/null || export XDG_CACHE_HOME="$HOME/.cache"
export TORCH_HOME="$XDG_CACHE_HOME/torch" TORCH_EXTENSIONS_DIR="$XDG_CACHE_HOME/torch_extensions"
export MPLCONFIGDIR="$XDG_CACHE_HOME/matplotlib" HF_HOME="$XDG_CACHE_HOME/huggingface"
mkdir -p "$TORCH_HOME" "$TORCH_EXTENSIONS_DIR" "$MPLCONFIGDIR" "$HF_HOME"

# The pinned environment, wherever the image put it.
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  export PATH="$VIRTUAL_ENV/bin:$PATH"
fi

# The repository's working directory (results/ and paper_tables/ are volumes under it), unless the caller chose
# another with --workdir.
if [ "$PWD" = / ] && [ -d /opt/hot ]; then cd /opt/hot; fi

exec "$@"
