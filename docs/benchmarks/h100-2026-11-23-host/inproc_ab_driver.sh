cd "$(dirname "$0")/.."
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/triton_backend > /dev/null 2>&1
PYTHONPATH=$PWD/.scratch/oldpkg timeout 150 python3 .scratch/inproc_ab.py 2>&1 | tee $OUT/inproc_ab.txt
