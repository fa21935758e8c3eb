#!/bin/bash
# One device session (docs/performance.md, "GPU"). Prepare, from the repository root: `.whl/` with the wheels of opacus,
# dp-accounting, kymatio, pydantic and their missing dependencies (device README), and `.gpudata/` with MNIST's four raw
# files gzipped plus a copy of docs/gpu/gpu_cut.yaml; then run `bash docs/gpu/gpu_check.sh` on the device machine.
# One device session: bench perf on CUDA, the gpu profile cut to fit (LiRA, 64 vectorised shadows), DP-SGD's default
# cell on CUDA. Each step is time-boxed so one failure leaves the others' results.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site
mkdir -p /tmp/data/MNIST/raw
for f in .gpudata/*.gz; do gunzip -c "$f" > /tmp/data/MNIST/raw/$(basename "$f" .gz); done
export PRIVBENCH_DATA=/tmp/data
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc;
  python3 -c "import torch,torchvision,opacus,sys;print(sys.version);print(torch.__version__,torchvision.__version__,opacus.__version__,torch.cuda.get_device_name())"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
t0=$SECONDS
timeout 150 python3 -m bench perf --device cuda --json $OUT/perf_cuda.json > $OUT/perf.log 2>&1; echo "perf rc=$? $((SECONDS-t0)) s"
tail -40 $OUT/perf.log
t0=$SECONDS
timeout 170 python3 -m bench run --profile gpu --config .gpudata/gpu_cut.yaml --device cuda --output /tmp/gpucut --no-privacy-off-points > $OUT/gpucut.log 2>&1; echo "gpucut rc=$? $((SECONDS-t0)) s"
cp /tmp/gpucut/results.json $OUT/gpucut_results.json 2>/dev/null; tail -30 $OUT/gpucut.log
t0=$SECONDS
timeout 130 python3 -m bench run --mechanisms dpsgd --epsilons 8 --device cuda --output /tmp/dpsgd --no-privacy-off-points > $OUT/dpsgd.log 2>&1; echo "dpsgd rc=$? $((SECONDS-t0)) s"
cp /tmp/dpsgd/results.json $OUT/dpsgd_results.json 2>/dev/null; tail -30 $OUT/dpsgd.log
