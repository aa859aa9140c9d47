"""Write the example Chakra trace examples/traces/gpt-pp2-dp8/ (16 ranks: 2 pipeline
stages x 8 data-parallel ranks, 4 micro-batches, GPipe), with Chakra's own protobuf
classes. Deterministic: the same bytes every run (tests check the shipped files).

    python scripts/make_chakra_example.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from chakra.schema.protobuf import et_def_pb2 as pb
from chakra.src.third_party.utils.protolib import encodeMessage

ROOT = Path(__file__).resolve().parents[1]
PP, DP, MB = 2, 8, 4
ACT = 4 << 20  # activations of one micro-batch, bytes
GRAD = 256 << 20  # gradients of one stage, bytes
FWD_US, BWD_US = 300, 600


def _attr(name: str, **kw) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, **kw)


def _p2p(kind: int, i: int, src: int, dst: int, deps: list[int], tag: int) -> pb.Node:
    return pb.Node(id=i, name="send" if kind == pb.COMM_SEND_NODE else "recv", type=kind,
                   data_deps=deps,
                   attr=[_attr("comm_src", int32_val=src), _attr("comm_dst", int32_val=dst),
                         _attr("comm_tag", int32_val=tag), _attr("comm_size", int64_val=ACT),
                         _attr("is_cpu_op", bool_val=False)])


def rank_nodes(rank: int) -> list[pb.Node]:
    stage, d = divmod(rank, DP)
    nodes: list[pb.Node] = [pb.Node(id=0, name="iteration start", type=pb.METADATA_NODE)]
    nid = 1

    def add(node: pb.Node) -> int:
        nonlocal nid
        node.id = nid
        nodes.append(node)
        nid += 1
        return node.id

    last = 0
    fwd_done = []
    for m in range(MB):  # forward
        deps = [last]
        if stage > 0:
            deps = [add(_p2p(pb.COMM_RECV_NODE, 0, (stage - 1) * DP + d, rank, [last], m))]
        c = add(pb.Node(name=f"fwd mb{m}", type=pb.COMP_NODE, duration_micros=FWD_US,
                        data_deps=deps))
        if stage < PP - 1:
            add(_p2p(pb.COMM_SEND_NODE, 0, rank, (stage + 1) * DP + d, [c], m))
        fwd_done.append(c)
        last = c
    for m in range(MB):  # backward
        deps = [last]
        if stage < PP - 1:
            deps = [add(_p2p(pb.COMM_RECV_NODE, 0, (stage + 1) * DP + d, rank, [last],
                             100 + m))]
        c = add(pb.Node(name=f"bwd mb{m}", type=pb.COMP_NODE, duration_micros=BWD_US,
                        data_deps=deps))
        if stage > 0:
            add(_p2p(pb.COMM_SEND_NODE, 0, rank, (stage - 1) * DP + d, [c], 100 + m))
        last = c
    ar = add(pb.Node(name="dp allreduce", type=pb.COMM_COLL_NODE, data_deps=[last],
                     attr=[_attr("comm_type", int64_val=pb.ALL_REDUCE),
                           _attr("comm_size", int64_val=GRAD),
                           _attr("pg_name", string_val=f"dp{stage}")]))
    add(pb.Node(name="optimizer", type=pb.COMP_NODE, duration_micros=200, data_deps=[ar]))
    return nodes


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for r in range(PP * DP):
        with open(out / f"gpt.{r}.et", "wb") as fh:
            encodeMessage(fh, pb.GlobalMetadata(version="0.0.4"))
            for n in rank_nodes(r):
                encodeMessage(fh, n)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "traces" / "gpt-pp2-dp8")
