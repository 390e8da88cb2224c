// The quickstart on Graphcore IPUs: the same experiment, with the poptorch executor reading an
// optimum-graphcore IPUConfig file (configs/ipu_config.json; relative paths are read from the working
// directory, so run from the repository root). Keys written here win over the file. See docs/ipu.md.
//   ipuflow train configs/quickstart_ipu.jsonnet -s runs/quickstart_ipu --compile-only   # fill ./exe_cache
//   ipuflow train configs/quickstart_ipu.jsonnet -s runs/quickstart_ipu
local quickstart = import "quickstart.jsonnet";

quickstart + {
  trainer+: {
    executor: {
      type: "poptorch",
      ipu_config: "configs/ipu_config.json",
      // IPUTrainingArguments' fp32: true; optimum's default (fp32: false) is precision "fp16".
      precision: "fp32",
    },
    // Warm-up counted in optimizer updates (IPUTrainer counts host calls of device_iterations updates).
    learning_rate_scheduler: { type: "linear_with_warmup", warmup_steps: 48 },
  },
}
