"""collector/probe-bundle and collector/probe-split: several probe files as one bpftrace
program, and its output given back to each family as if each had run alone.

The split is checked on real output: tests/fixtures/host-overflow-c5 holds the raw output
of all four probes, each run alone in one capture (make-host-captures beside the
fixtures says how). Interleaved the way one bundled process prints (the merged BEGIN's
banners and headers first, then the families' interval blocks in turn, each marker
naming its file), the split must give back each family's output, line for line."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from analysis.families import FAMILIES
from tests.conftest import FIXTURES, ROOT

BUNDLE, SPLIT = ROOT / "collector" / "probe-bundle", ROOT / "collector" / "probe-split"
RUN = FIXTURES / "host-overflow-c5"
BLOCK = re.compile(r"^(?!BEGIN$|END$)[a-z]\S*$", re.M)  # a probe line at column 0


def _raw(fam: str) -> Path:
    """A family's real output: RUN's, or for a family newer than RUN the first fixture's that ran it."""
    for run in [RUN, *sorted(FIXTURES.iterdir())]:
        if (run / f"probe_{fam}.out").is_file():
            return run / f"probe_{fam}.out"
    raise FileNotFoundError(f"no fixture ran the {fam} probe")


def _bundle(*files: str) -> str:
    return subprocess.run([str(BUNDLE), *(str(ROOT / "probes" / f) for f in files)], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip


def test_one_begin_one_end_and_every_other_block_copied() -> None:
    files = [f"{name}.bt" for name in FAMILIES]
    text = _bundle(*files)
    assert len(re.findall(r"^BEGIN$", text, re.M)) == 1 and len(re.findall(r"^END$", text, re.M)) == 1
    for f in files:
        src = (ROOT / "probes" / f).read_text()
        for probe in BLOCK.findall(src):
            assert probe in text, (f, probe)
        # Every banner and header printf of the file is in the merged BEGIN.
        for line in re.findall(r'^\s*printf\("#.*$', src, re.M):
            assert line.strip() in text, (f, line)
    # Each file's marker names it; no bare marker is left.
    assert 'printf("=== %s\\n"' not in text
    for f in ("retransmits.bt", "time_wait.bt", "epoll.bt"):
        assert f'printf("=== %s {f}\\n"' in text
    # So does the marker of a block whose totals start again from zero.
    assert 'printf("=== %s fresh\\n"' not in text
    for f in ("retransmits.bt", "time_wait.bt"):
        assert f'printf("=== %s fresh {f}\\n"' in text


def test_blocks_on_one_tracepoint_become_one_program() -> None:
    """The accept queue's LISTEN -> CLOSE block and TIME_WAIT's block on inet_sock_set_state: one
    program (the kernel runs each attached program at every hit), each body under its file's
    name, a predicate as an if around its body, each body's $variables its own."""
    text = _bundle("accept_queue.raw.bt", "time_wait.raw.bt", "socket_buffers.raw.bt")
    assert len(re.findall(r"^rawtracepoint:inet_sock_set_state$", text, re.M)) == 1
    merged = text.split("\nrawtracepoint:inet_sock_set_state\n{\n", 1)[1].split("\n}\n\n", 1)[0]
    assert merged.startswith("// accept_queue.raw.bt\nif ( arg1 == 10 ) {\n"), merged[:200]
    assert "\n// time_wait.raw.bt\n" in merged
    assert "$b1_slot = @aq_slot[" in merged and "$b2_sk = (struct sock *)arg0;" in merged
    assert not re.search(r"\$(?!b[12]_)[A-Za-z_]", merged), "a $variable left without its prefix"
    # Blocks on tracepoints no other file shares stay as they were.
    assert "\n// socket_buffers.raw.bt\nrawtracepoint:sock_send_length\n{\n\t$sk = " in text


@pytest.mark.parametrize(
    "files", [("accept_queue.raw.bt", "time_wait.raw.bt"), ("time_wait.raw.bt", "accept_queue.raw.bt")]
)
def test_each_file_keeps_the_order_of_its_blocks(files: tuple[str, str]) -> None:
    """bpftrace types a map at its first use in the text: the accept queue's merged
    inet_sock_set_state block uses @aq_slot, typed in its sk_data_ready block before it, so it
    must stay after that block whichever file comes first (where the TIME_WAIT block stood,
    bpftrace 0.23 refused the bundle: the VM matrix's time-wait lab, 2026-12-07)."""
    text = _bundle(*files)
    for f in files:
        probes = list(dict.fromkeys(BLOCK.findall((ROOT / "probes" / f).read_text())))
        at = [re.search(rf"^{re.escape(p)}$", text, re.M).start() for p in probes]  # type: ignore[union-attr]
        assert at == sorted(at), (f, probes)


def test_two_files_on_two_tracepoints_in_opposite_orders_are_refused(tmp_path: Path) -> None:
    """No order of the merged programs keeps both files' orders: said, not bundled wrong."""
    one, two = tmp_path / "one.bt", tmp_path / "two.bt"
    one.write_text("tracepoint:tcp:tcp_send_reset\n{\n\t@a = count();\n}\ntracepoint:tcp:tcp_receive_reset\n{\n"
                   "\t@b = count();\n}\n")  # fmt: skip
    two.write_text("tracepoint:tcp:tcp_receive_reset\n{\n\t@c = count();\n}\ntracepoint:tcp:tcp_send_reset\n{\n"
                   "\t@d = count();\n}\n")  # fmt: skip
    r = subprocess.run([str(BUNDLE), str(one), str(two)], capture_output=True, text=True)
    assert r.returncode != 0 and "opposite orders" in r.stderr


def test_a_block_that_returns_stays_a_program_of_its_own(tmp_path: Path) -> None:
    """return (or exit) ends the program: merged, it would skip the blocks after it."""
    first, second = tmp_path / "first.bt", tmp_path / "second.bt"
    first.write_text("tracepoint:sock:inet_sock_set_state\n{\n\tif (args->newstate == 7) {\n\t\treturn;\n\t}\n"
                     "\t@a = count();\n}\n")  # fmt: skip
    second.write_text("tracepoint:sock:inet_sock_set_state\n/args->protocol == 6/\n{\n\t$n = 1;\n\t@b = count();\n}\n")
    third = tmp_path / "third.bt"
    third.write_text("tracepoint:sock:inet_sock_set_state\n{\n\t$n = 2;\n\t@c = count();\n}\n")
    text = subprocess.run([str(BUNDLE), str(first), str(second), str(third)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    assert len(re.findall(r"^tracepoint:sock:inet_sock_set_state$", text, re.M)) == 2
    assert "\treturn;" in text and "// second.bt\nif (args->protocol == 6) {\n\t$b1_n = 1;" in text
    assert "// third.bt\n\t$b2_n = 2;" in text


def test_a_file_cut_short_is_refused(tmp_path: Path) -> None:
    cut = tmp_path / "cut.bt"
    cut.write_text((ROOT / "probes" / "time_wait.bt").read_text().rsplit("\n}", 1)[0])
    r = subprocess.run([str(BUNDLE), str(cut)], capture_output=True, text=True)
    assert r.returncode != 0 and "ends inside a block" in r.stderr


def _blocks(raw: str) -> tuple[list[str], list[list[str]]]:
    """A probe's output: its banner and headers, then one list of lines per interval
    (from a marker to the next; a probe that prints rows: the rows of one time_s)."""
    head, blocks = [], []
    for line in raw.splitlines():
        if line.startswith("=== "):
            blocks.append([line])
        elif blocks and (blocks[-1][0].startswith("=== ") or line.split(",")[1:2] == blocks[-1][0].split(",")[1:2]):
            blocks[-1].append(line)
        elif not blocks and (line.startswith("#") or line.startswith("Attaching ") or not line):
            head.append(line)
        else:
            blocks.append([line])
    return head, blocks


def _interleaved(outputs: dict[str, str]) -> str:
    """The families' outputs as one bundled bpftrace prints them: "Attaching" once, the
    banners and headers in family order, then interval blocks in turn, markers named."""
    heads, blocks = {}, {}
    for fam, raw in outputs.items():
        head, bl = _blocks(raw)
        heads[fam] = [h for h in head if not h.startswith("Attaching ")]
        blocks[fam] = [[f"{b[0]} {fam}.bt", *b[1:]] if b[0].startswith("=== ") else b for b in bl]
    lines = ["Attaching 26 probes..."]
    for fam in outputs:
        lines += heads[fam]
    for i in range(max(len(b) for b in blocks.values())):
        for fam in outputs:
            if i < len(blocks[fam]):
                lines += blocks[fam][i]
    return "\n".join(lines) + "\n"


def test_split_gives_each_family_its_own_output_back(tmp_path: Path) -> None:
    outputs = {fam: (_raw(fam)).read_text(errors="surrogateescape") for fam in FAMILIES}
    assert all(_blocks(raw)[1] for raw in outputs.values()), "every fixture output has interval blocks"
    combined = _interleaved(outputs)
    subprocess.run([str(SPLIT), str(tmp_path)], input=combined.encode(errors="surrogateescape"), check=True)
    for fam, raw in outputs.items():
        got = (tmp_path / f"probe_{fam}.out").read_text(errors="surrogateescape")
        # Blank lines carry nothing (bpftrace prints some at exit): they go with whichever
        # family printed last.
        want = [ln for ln in raw.splitlines() if ln and not ln.startswith("Attaching ")]
        assert [ln for ln in got.splitlines() if ln and not ln.startswith("Attaching ")] == want, fam


def test_split_writes_each_line_through_while_its_input_stays_open(tmp_path: Path) -> None:
    """A quiet family prints a few bytes a second: its banner must reach its file at once, not
    when a block of input fills (mawk reads blocks unless -W interactive), or its capture never
    gets ready."""
    split = subprocess.Popen([str(SPLIT), str(tmp_path)], stdin=subprocess.PIPE)
    assert split.stdin is not None
    try:
        split.stdin.write(b"Attaching 3 probes...\n# time_wait.bt schema=2 tier=tracepoint interval_s=1: x\n")
        split.stdin.flush()
        out, deadline = tmp_path / "probe_time_wait.out", time.monotonic() + 10
        while "schema=2" not in (out.read_text() if out.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "# time_wait.bt schema=2" in out.read_text(), "the banner waited for more input"
    finally:
        split.stdin.close()
        split.wait(timeout=10)


def test_split_gives_a_fresh_marker_to_its_family(tmp_path: Path) -> None:
    """ "=== <epoch> fresh <file>" (totals cleared after the last block) goes to the file's
    family as "=== <epoch> fresh"."""
    outputs = {fam: (_raw(fam)).read_text(errors="surrogateescape") for fam in FAMILIES}
    tw = outputs["time_wait"].splitlines(keepends=True)
    third = [i for i, ln in enumerate(tw) if ln.startswith("=== ")][2]
    tw[third] = tw[third].rstrip("\n") + " fresh\n"
    outputs["time_wait"] = "".join(tw)
    subprocess.run([str(SPLIT), str(tmp_path)], input=_interleaved(outputs).encode(errors="surrogateescape"),
                   check=True)  # fmt: skip
    got = (tmp_path / "probe_time_wait.out").read_text(errors="surrogateescape")
    assert got.count(" fresh\n") == 1 and tw[third] in got
    for fam in FAMILIES:
        if fam != "time_wait":
            assert "fresh" not in (tmp_path / f"probe_{fam}.out").read_text(errors="surrogateescape"), fam


def test_split_gives_a_bpftrace_warning_to_the_family_of_the_line_it_names(tmp_path: Path) -> None:
    """bpftrace 0.23 prints a helper error into the output as four lines, the first naming the
    program's line ("FILE:LINE:COL: WARNING: ..."). They went to the family that printed last (a
    bundled capture gave epoll the accept_queue raw tier's warnings: 10 of 317 in a run here); now
    to the family whose block in the bundle holds that line, also right after another's lines."""
    bundle = tmp_path / "probes.bt"
    bundle.write_text(_bundle("time_wait.raw.bt", "epoll.bt"))
    n = next(i for i, ln in enumerate(bundle.read_text().splitlines(), 1) if "delete(@tw_born[" in ln)
    warning = [
        f"{bundle}:{n}:5-34: WARNING: Can't delete map element because it does not exist.",
        "Additional Info - helper: map_delete_elem, retcode: -2",
        "                delete(@tw_born[(uint64)$sk]);",
        "                ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~",
    ]
    out = [
        "Attaching 9 probes...",
        "# time_wait.bt schema=2 tier=rawtracepoint interval_s=1: x",
        "#tw_connect,time_s,netns,pid,comm,family,raddr,rport,errno,failures",
        "# epoll.bt schema=3 interval_s=1: x",
        "#ep_loop,time_s,pid,tid,comm,calls,nb_calls,nb_ns_sum,events_sum,ret_zero,ret_full,errors,wait_ns_sum,cpu_ns",
        "=== 1795824129 time_wait.raw.bt",
        "=== 1795824129 epoll.bt",
        "@ep_loop__calls[42, 43, loop]: 8",
        *warning,
        "@ep_loop__nb_calls[42, 43, loop]: 0",
    ]
    subprocess.run([str(SPLIT), str(tmp_path)], input="\n".join(out) + "\n", text=True, check=True)
    tw = (tmp_path / "probe_time_wait.out").read_text().splitlines()
    ep = (tmp_path / "probe_epoll.out").read_text().splitlines()
    assert tw[-4:] == warning and not any("WARNING" in ln for ln in ep)
    assert ep[-2:] == ["@ep_loop__calls[42, 43, loop]: 8", "@ep_loop__nb_calls[42, 43, loop]: 0"]


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_split_output_converts_to_the_same_tables(fam: str, tmp_path: Path) -> None:
    outputs = {f: (_raw(f)).read_text(errors="surrogateescape") for f in FAMILIES}
    subprocess.run([str(SPLIT), str(tmp_path / "split")], input=_interleaved(outputs).encode(errors="surrogateescape"),
                   check=True)  # fmt: skip
    for name, raw in (("alone", _raw(fam)), ("split", tmp_path / "split" / f"probe_{fam}.out")):
        subprocess.run([str(ROOT / "collector" / "probe-to-csv"), str(raw), str(tmp_path / name)], check=True,
                       capture_output=True)  # fmt: skip
    for rec in FAMILIES[fam].records:
        a, b = tmp_path / "alone" / f"{rec}.csv", tmp_path / "split" / f"{rec}.csv"
        assert a.exists() == b.exists(), rec
        if a.exists():
            assert a.read_bytes() == b.read_bytes(), rec


def test_stream_mode_gives_the_rows_each_family_gives_alone() -> None:
    """probe-split --stream (the exporter's reader of a bundle): the rows each family's own
    probe-to-csv --stream prints from its own output, all of them, none twice."""
    outputs = {f: (_raw(f)).read_bytes() for f in FAMILIES}
    files = [str(ROOT / "probes" / f"{f}.bt") for f in FAMILIES]
    combined = _interleaved({f: o.decode(errors="surrogateescape") for f, o in outputs.items()})
    got = subprocess.run([str(SPLIT), "--stream", *files], input=combined.encode(errors="surrogateescape"),
                         capture_output=True, check=True).stdout  # fmt: skip
    want: list[bytes] = []
    for f, raw in outputs.items():
        want += subprocess.run([str(ROOT / "collector" / "probe-to-csv"), "--stream", str(ROOT / "probes" / f"{f}.bt")],
                               input=raw, capture_output=True, check=True).stdout.splitlines()  # fmt: skip
    rows = sorted(ln for ln in got.splitlines() if ln and not ln.startswith(b"# "))
    assert rows == sorted(ln for ln in want if ln and not ln.startswith(b"# "))
    assert len(rows) > 100
