#!/usr/bin/env bash
# Container entrypoint (Docker's ENTRYPOINT, Apptainer's runscript): make the image usable for whichever user runs
# it, then run the command (default: snakemake --cores 4) in the repository's working directory, /opt/hot.
# tests/infra/test_entrypoint.py runs this script with a temporary directory standing in for /opt/hot.
#
#   HOT_WORKDIR   the working directory (default /opt/hot, the image's repository); Docker's --workdir and the
#                 host directory Apptainer starts in are not used, so the documented volume binds always apply.
#                 Point it elsewhere (e.g. a checkout bound into the container) to run that instead.
set -euo pipefail

# An arbitrary uid (`docker run --user 1234:1234`) has no passwd entry: Python's getpass.getuser(), which torch
# uses for its cache paths, then fails unless USER or LOGNAME is set.
uid=$(id -u)
if [ -z "${USER:-}" ]; then USER=$(id -un 2>/dev/null) || USER="uid$uid"; export USER; fi
export LOGNAME="${LOGNAME:-$USER}"

# HOME (and every cache under it: torch, torch extensions, triton, matplotlib, Hugging Face) must be writable:
# under --user the image's /home/hot is not, so HOME moves to a private directory in TMPDIR.
if ! { mkdir -p "${HOME:-/nonexistent}/.cache" && [ -w "$HOME/.cache" ]; } 2>/dev/null; then
  export HOME="${TMPDIR:-/tmp}/hot-home-$uid"
  mkdir -p "$HOME/.cache"
fi
# Cache variables inherited from elsewhere that point somewhere unwritable are dropped (their defaults follow HOME).
for var in XDG_CACHE_HOME TORCH_HOME TORCH_EXTENSIONS_DIR TRITON_CACHE_DIR MPLCONFIGDIR HF_HOME; do
  dir=${!var:-}
  if [ -n "$dir" ] && ! { mkdir -p "$dir" && [ -w "$dir" ]; } 2>/dev/null; then unset "$var"; fi
done

# The pinned environment, wherever the image put it.
if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
  export PATH="$VIRTUAL_ENV/bin:$PATH"
fi

# The repository's working directory, whatever directory the container started in.
workdir=${HOT_WORKDIR:-/opt/hot}
cd "$workdir" || { echo "entrypoint: working directory $workdir does not exist (HOT_WORKDIR)" >&2; exit 2; }

# In the image .snakemake is a link into the results volume (results/.snakemake): create its target so Snakemake's
# metadata, locks and incomplete-job markers live on the volume, next to the results they describe.
if [ -L .snakemake ]; then
  target=$(readlink .snakemake)
  if ! mkdir -p "$target" 2>/dev/null || [ ! -w "$target" ]; then
    results=$(dirname "$target")
    echo "entrypoint: $workdir/$results is not writable by uid $uid: mount a directory you own there" \
         "(-v \"\$PWD/results:$workdir/results\", Apptainer: --bind) or run without --user" >&2
    case "${1:-snakemake}" in snakemake|*/snakemake) exit 2 ;; esac
  fi
fi

# CUDA_VISIBLE_DEVICES set but empty hides every GPU: what `--env CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES`
# gives on a host where it is unset. (Apptainer's --cleanenv drops it altogether: pass it as
# APPTAINERENV_CUDA_VISIBLE_DEVICES, see docs/containers.md.)
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ] && [ -z "$CUDA_VISIBLE_DEVICES" ]; then
  echo "entrypoint: warning: CUDA_VISIBLE_DEVICES is set but empty, so no GPU is visible" >&2
fi

if [ $# -eq 0 ]; then set -- snakemake --cores 4; fi
exec "$@"
