"""The overlap the study is about, on the CPU: fake streams, events and device tensors record every call,
so that the order of copy, record_event, wait_event and record_stream, and the pool's wait before a slot
is reused, are checked. On a real CPU device streams are no-ops: without fakes a feeder that never waits,
or never calls record_stream, would pass every other test."""
import contextlib
from collections import deque
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

import infer
import train

CPU = ["--device", "cpu", "--img-size", "32", "--batch-size", "2"]


class World:
    """A fake device: its streams, events and tensors append what is done to them to `log`."""

    def __init__(self):
        self.log: list[tuple] = []
        self.current = self.default = Stream(self, "default")
        self.made = 0

    def new_stream(self, device=None) -> "Stream":
        self.made += 1
        return Stream(self, f"stream{self.made}")

    @contextlib.contextmanager
    def stream(self, s: "Stream"):
        was, self.current = self.current, s
        try:
            yield
        finally:
            self.current = was

    def module(self):
        """What torch.get_device_module(...) gives the feeders."""
        return SimpleNamespace(stream=self.stream, current_stream=lambda device=None: self.default)


class Stream:
    def __init__(self, world: World, name: str):
        self.world, self.name = world, name

    def record_event(self) -> "Event":
        event = Event(self.world, f"event{len(self.world.log)}@{self.name}")
        self.world.log.append(("record_event", self.name, event.name))
        return event

    def wait_event(self, event: "Event") -> None:
        self.world.log.append(("wait_event", self.name, event.name))

    def wait_stream(self, other: "Stream") -> None:
        self.world.log.append(("wait_stream", self.name, other.name))


class Event:
    def __init__(self, world: World, name: str):
        self.world, self.name, self.done = world, name, False

    def synchronize(self) -> None:
        self.world.log.append(("synchronize", self.name))
        self.done = True

    def query(self) -> bool:
        return self.done


class DeviceTensor:
    """A tensor on the fake device: record_stream is logged."""
    device = SimpleNamespace(type="cuda")

    def __init__(self, world: World, name: str):
        self.world, self.name = world, name

    def record_stream(self, s: Stream) -> None:
        self.world.log.append(("record_stream", self.name, s.name))


class Source:
    """A Loader's interface: batch k's host tensors, and the copies it is told of."""

    def __init__(self, world: World):
        self.world, self.k = world, 0

    def __next__(self) -> train.Batch:
        self.k += 1
        self.world.log.append(("get", self.k))
        return train.Batch(f"host{self.k}", f"labels{self.k}", slot=self.k)

    def copy_issued(self, host: train.Batch, done) -> None:
        self.world.log.append(("copied", host.slot, done.name if done else None))


@pytest.fixture
def world(monkeypatch) -> World:
    w = World()
    monkeypatch.setattr(train, "new_stream", w.new_stream)
    monkeypatch.setattr(train, "current_stream", lambda device: w.default)
    monkeypatch.setattr(torch, "get_device_module", lambda kind=None: w.module())

    def to_device(host, device, non_blocking):
        k = host.slot
        w.log.append(("copy", k, w.current.name))
        return train.Batch(DeviceTensor(w, f"images{k}"), DeviceTensor(w, f"labels{k}"))
    monkeypatch.setattr(train, "to_device", to_device)
    return w


def feeder(world: World, preset: str, *flags: str):
    cfg = train.parse_config(["--variant", preset, *flags, *CPU])
    cls = train.Streams if cfg.streams else train.Prefetcher if cfg.prefetcher else train.Feeder
    mark = train.Marker("off", False)
    return cls(cfg, torch.device("cpu"), mark, Source(world))


def after(log: list, first: tuple, then: tuple) -> bool:
    return first in log and then in log and log.index(first) < log.index(then)


def copy_event(log: list, k: int) -> str:
    """The event recorded right after batch k's copy was issued, on the copy's stream."""
    i = next(i for i, x in enumerate(log) if x[:2] == ("copy", k))
    assert log[i + 1][:2] == ("record_event", log[i][2]), "no event recorded on the copy's stream after it"
    return log[i + 1][2]


def handed_over(log: list, k: int, compute: str) -> None:
    """Batch k is ready for the compute stream: it waits on the event recorded after k's copy, and both of
    k's tensors are marked as used by it, so the allocator cannot give their memory to a later copy."""
    event = copy_event(log, k)
    for t in (f"images{k}", f"labels{k}"):
        assert after(log, ("wait_event", compute, event), ("record_stream", t, compute))


@pytest.mark.parametrize("preset", ["streams", "prefetch"])
def test_the_next_batch_is_copied_on_the_copy_stream_before_this_one_computes(world, preset):
    f = feeder(world, preset)
    copy, compute = f.copy_stream.name, f.compute_stream.name
    assert copy != compute, "one stream for copies and compute: nothing overlaps"
    assert copy != "default", "copies on the stream the loop computes on: nothing overlaps"
    if preset == "prefetch":
        assert compute == "default"  # apex's data_prefetcher: the loop computes on its own stream
    batch = next(f)
    log = world.log
    # batch 1's copy was issued on the copy stream and its event recorded there, when the feeder was made;
    # taking it issues batch 2's copy at once, so that it runs while batch 1 computes
    assert ("copy", 1, copy) in log and ("copy", 2, copy) in log
    assert after(log, ("copy", 1, copy), ("copy", 2, copy))
    handed_over(log, 1, compute)
    assert batch.images.name == "images1"
    # the source hears of the copy's event, so that a pool slot is not refilled before the copy has landed
    assert ("copied", 1, copy_event(log, 1)) in log


def test_without_streams_the_copy_is_on_the_stream_that_computes(world):
    f = feeder(world, "async")
    batch = next(f)
    assert f.copy_stream is f.compute_stream
    assert ("copy", 1, "default") in world.log and not any(op[0] == "copy" and op[1] == 2 for op in world.log)
    assert batch.images.name == "images1"  # one batch at a time: get, copy, compute


def test_a_feeder_that_skips_record_stream_is_caught(world, monkeypatch):
    """The test above fails on a hand-over without record_stream (torchtnt's bug): the check is no tautology."""
    def no_record_stream(batch, compute_stream):
        if batch.ready is not None:
            compute_stream.wait_event(batch.ready)
        return batch
    monkeypatch.setattr(train, "hand_over", no_record_stream)
    f = feeder(world, "streams")
    next(f)
    with pytest.raises(AssertionError):
        handed_over(world.log, 1, f.compute_stream.name)


def test_a_pool_slot_is_refilled_only_after_the_copy_that_read_it(world):
    """PoolLoader: taking batch j lets a worker write batch j + queued into slot (j + queued) % n; the event
    of the copy that last read that slot is waited on first."""
    loader = train.PoolLoader.__new__(train.PoolLoader)
    n, queued = 4, 2

    def it():
        for k in range(100):
            world.log.append(("worker may write", (k + queued) % n))
            yield k % n, None
    loader.queued, loader.verify, loader.encoded = queued, False, False
    loader.pin_each_batch, loader.taken, loader.done = False, 0, [None] * n
    loader.pool = SimpleNamespace(n=n, images=[f"slot{i}" for i in range(n)], labels=[f"labels{i}" for i in range(n)])
    loader.it, loader.waited = it(), 0.0
    copy = world.new_stream()
    events = []
    for _ in range(6):
        host = next(loader)
        events.append(copy.record_event())
        loader.copy_issued(host, events[-1])
    order = [x for x in world.log if x[0] in ("synchronize", "worker may write")]
    writes = [i for i, x in enumerate(order) if x[0] == "worker may write"]
    checked = 0
    for k, at in enumerate(writes):
        freed = k + queued - n  # the batch that last read the slot this fetch lets a worker refill
        if 0 <= freed < len(events):
            assert ("synchronize", events[freed].name) in order[:at], (k, order)
            checked += 1
    assert checked == 4  # batches 2..5 each refill a slot that an earlier copy read


def test_the_output_copy_on_a_side_stream_waits_for_the_forward_and_is_handed_over_once_done(world, monkeypatch):
    """infer.py's streams: the copy stream waits for the compute stream (the forward wrote the output), the
    output is marked as used by the copy stream, and a buffer goes to its consumer only after its event."""
    cfg = infer.parse_config(["--variant", "streams", "--workers", "0", "--device", "cpu", "--img-size", "8",
                              "--batch-size", "1", "--classes", "2"])
    cfg = replace(cfg, pool=True, pinned=True, streams=True)
    sink = infer.Sink.__new__(infer.Sink)
    sink.cfg, sink.pending = cfg, deque()  # the copy's state only, and consumers that log each hand-over
    sink.consumers = SimpleNamespace(hand=lambda i, slot, out: world.log.append(("hand", i)))
    sink.async_copies, sink.free = True, deque([0, 1])

    class Slot:
        def copy_(self, out, non_blocking=False):
            world.log.append(("copy output", world.current.name, non_blocking))
    sink.slots = [Slot(), Slot()]
    sink.pool = object()
    monkeypatch.setattr(infer.torch.cuda, "stream", world.stream)
    compute, copy = world.default, world.new_stream()
    out = DeviceTensor(world, "out0")
    sink.put(0, out, copy, compute)
    log = world.log
    assert after(log, ("wait_stream", copy.name, "default"), ("copy output", copy.name, True))
    assert ("record_stream", "out0", copy.name) in log
    event = next(x for x in log if x[0] == "record_event")
    assert after(log, ("copy output", copy.name, True), event)
    assert ("hand", 0) not in log  # its copy may still be in flight
    sink.hand_oldest()
    assert after(log, ("synchronize", event[2]), ("hand", 0))
