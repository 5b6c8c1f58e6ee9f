"""Writes the sequence-batching test models (tests/e2e/test_sequence.py).

    .venv/bin/python tests/models/gen_sequence_models.py OUTDIR
    .venv/bin/python tests/models/gen_sequence_models.py --aoti OUTDIR

The second form writes seq_aoti only: the unbatched-state accumulator as an
AOTInductor package (model.pt2; a minute or more of C++ compiling).

Each model gets OUTDIR/<name>/config.pbtxt and OUTDIR/<name>/1/model.pt. The
models accumulate their inputs in an implicit state (sequence_batching.state):
the server keeps the running sum between the requests of a sequence, the model
only adds. Tensor names follow Triton's <name>__<index> rule for control and
state tensors (forward()'s argument order: inputs, control inputs, states).
"""
import os
import struct
import sys

import torch


class Accumulate(torch.nn.Module):
    """(x, START, END, READY, CORRID, state) -> (state + x, the four controls
    as INT64, state + x as the new state)."""

    def forward(self, x, start, end, ready, corrid, state):
        total = state + x
        controls = torch.cat([start.to(torch.int64), end.to(torch.int64),
                              ready.to(torch.int64), corrid.to(torch.int64)], dim=1)
        return total, controls, total


class AccumulateRows(torch.nn.Module):
    """Accumulate, plus ROWS: per row [rows in the batch, this row's index,
    rows with READY true] — what the model saw of the batch's layout."""

    def forward(self, x, start, end, ready, corrid, state):
        total = state + x
        controls = torch.cat([start.to(torch.int64), end.to(torch.int64),
                              ready.to(torch.int64), corrid.to(torch.int64)], dim=1)
        n = x.shape[0]
        rows = torch.stack([torch.full([n], n, dtype=torch.int64),
                            torch.arange(n, dtype=torch.int64),
                            torch.full([n], 0, dtype=torch.int64) + ready.to(torch.int64).sum()],
                           dim=1)
        return total, controls, total, rows


class AccumulateStart(torch.nn.Module):
    """Unbatched: (x, START, state) -> (state + x, state + x as the new state)."""

    def forward(self, x, start, state):
        total = state + x
        return total, total


ACCUMULATE_IO = """
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "CONTROLS__1" data_type: TYPE_INT64 dims: [ 4 ] }
]
"""

ACCUMULATE_CONTROLS = """
  control_input [
    { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END__2" control [ { kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] } ] },
    { name: "READY__3" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] } ] },
    { name: "CORRID__4" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64 } ] }
  ]
  state [ {
    input_name: "STATE__5" output_name: "STATE__2" data_type: TYPE_FP32 dims: [ 4 ]
    initial_state: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true name: "zeros" }
  } ]
"""


def accumulate_config(name, strategy, idle_us, instances=2):
    return ('name: "%s"\nbackend: "pytorch"\nmax_batch_size: 8\n%s'
            'instance_group [ { kind: KIND_CPU count: %d } ]\n'
            'sequence_batching {\n  max_sequence_idle_microseconds: %d\n%s  %s\n}\n'
            % (name, ACCUMULATE_IO, instances, idle_us, ACCUMULATE_CONTROLS, strategy))


# The initial state of seq_file: the data file's four FP32 values.
FILE_INITIAL_STATE = [100.0, 200.0, 300.0, 400.0]

SEQ_FILE_CONFIG = """name: "seq_file"
backend: "pytorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  control_input [
    { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START bool_false_true: [ false, true ] } ] }
  ]
  state [ {
    input_name: "STATE__2" output_name: "STATE__1" data_type: TYPE_FP32 dims: [ 4 ]
    initial_state: { data_type: TYPE_FP32 dims: [ 4 ] data_file: "start.bin" name: "file" }
  } ]
}
"""


# seq_rows: one instance of four slots, so that which slot (row) a sequence
# gets is known: the first free one.
SEQ_ROWS_CONFIG = (accumulate_config("seq_rows", "direct { }", 60000000, instances=1)
                   .replace("max_batch_size: 8", "max_batch_size: 4")
                   .replace('{ name: "CONTROLS__1" data_type: TYPE_INT64 dims: [ 4 ] }',
                            '{ name: "CONTROLS__1" data_type: TYPE_INT64 dims: [ 4 ] },\n'
                            '  { name: "ROWS__3" data_type: TYPE_INT64 dims: [ 3 ] }'))


def models():
    """name -> (config text, module)."""
    idle = 60000000  # a minute: no sequence of the load tests idles out
    return {
        # A direct instance waits up to 2 ms for its active slots' next
        # requests: without it, a host whose cores outnumber the clients'
        # threads (an H200 host's 16) runs every request the moment it
        # arrives, alone, and no batch of the load test holds two sequences.
        "seq_direct": (accumulate_config("seq_direct", "direct { max_queue_delay_microseconds: 2000 }",
                                         idle), Accumulate()),
        "seq_oldest": (accumulate_config(
            "seq_oldest",
            "oldest { max_candidate_sequences: 16 preferred_batch_size: [ 4 ] "
            "max_queue_delay_microseconds: 1000 }", idle), Accumulate()),
        # 0.3 s: the idle test waits this long, and no more than a few times it.
        "seq_idle": (accumulate_config("seq_idle", "direct { }", 300000, instances=1),
                     Accumulate()),
        "seq_file": (SEQ_FILE_CONFIG, AccumulateStart()),
        "seq_rows": (SEQ_ROWS_CONFIG, AccumulateRows()),
    }


SEQ_AOTI_CONFIG = """name: "seq_aoti"
platform: "torch_aoti"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  oldest { max_candidate_sequences: 8 }
  control_input [
    { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
  ]
  state [ { input_name: "STATE__2" output_name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
}
"""


class AccumulateBatched(torch.nn.Module):
    """(x, START, state) -> (state + x, state + x as the new state)."""

    def forward(self, x, start, state):
        total = state + x
        return total, total


def write_aoti(out):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "examples"))
    from export_aoti import export_package
    os.makedirs(os.path.join(out, "seq_aoti", "1"), exist_ok=True)
    with open(os.path.join(out, "seq_aoti", "config.pbtxt"), "w") as f:
        f.write(SEQ_AOTI_CONFIG)
    args = (torch.randn(2, 4), torch.zeros(2, 1, dtype=torch.int32), torch.randn(2, 4))
    export_package(AccumulateBatched(), args, path=os.path.join(out, "seq_aoti", "1", "model.pt2"),
                   batch_max=8)
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--aoti":
        return write_aoti(argv[2])
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    for name, (config, module) in models().items():
        os.makedirs(os.path.join(out, name, "1"), exist_ok=True)
        with open(os.path.join(out, name, "config.pbtxt"), "w") as f:
            f.write(config)
        torch.jit.script(module.eval()).save(os.path.join(out, name, "1", "model.pt"))
    os.makedirs(os.path.join(out, "seq_file", "initial_state"), exist_ok=True)
    with open(os.path.join(out, "seq_file", "initial_state", "start.bin"), "wb") as f:
        f.write(struct.pack("<4f", *FILE_INITIAL_STATE))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
