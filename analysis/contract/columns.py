"""How a CSV column and table of the contract are declared, and the columns many tables share."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pandera.pandas as pa

INT = "Int64"  # nullable integer: empty cells stay <NA> instead of failing
FLOAT = "float64"
STR = "string"

COMM_TEXT = (
    "raw bytes of the kernel's task comm; quoted per RFC 4180 when it holds , \" CR or LF; "
    "invalid UTF-8 decoded as \\xNN"
)
EPOCH_MIN, EPOCH_MAX = 946_684_800, 4_102_444_800  # 2000-01-01 .. 2100-01-01 UTC


@dataclass(frozen=True)
class Col:
    name: str
    dtype: str
    description: str
    checks: tuple[pa.Check, ...] = ()
    nullable: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    file: str
    writer: str
    version: int
    description: str
    columns: tuple[Col, ...]
    optional: bool = False  # a run may lack the file (e.g. no lab client)
    key: tuple[str, ...] = ()  # columns no two rows may share (empty: rows may repeat)

    @property
    def probe(self) -> bool:
        return self.writer.startswith("probes/")

    @property
    def probe_family(self) -> str | None:
        """The probe family that writes the table (probes/<family>.bt), None if no probe does."""
        return self.writer.removeprefix("probes/").removesuffix(".bt") if self.probe else None

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def schema(self) -> pa.DataFrameSchema:
        """The pandera schema, built once per table: building it took 9 % of a report of a
        damaged run (a few ms each time, and loading asks for it per table, per run)."""
        built = self.__dict__.get("_schema")
        if built is None:
            built = self._build_schema()
            object.__setattr__(self, "_schema", built)  # frozen: the cache is not a field
        return built

    def empty(self) -> pd.DataFrame:
        """A table with no rows and the schema's dtypes (a copy: callers may add to it)."""
        built = self.__dict__.get("_empty")
        if built is None:
            built = self.schema().coerce_dtype(pd.DataFrame(columns=self.column_names))
            object.__setattr__(self, "_empty", built)
        return built.copy()

    def _build_schema(self) -> pa.DataFrameSchema:
        return pa.DataFrameSchema(
            {
                c.name: pa.Column(
                    c.dtype,
                    checks=list(c.checks),
                    nullable=c.nullable,
                    description=c.description,
                )
                for c in self.columns
            },
            strict=True,
            ordered=True,
            coerce=True,
            name=self.name,
        )


NONNEG = (pa.Check.ge(0),)
PORT = (pa.Check.in_range(0, 65535),)


def count_col(name: str, description: str) -> Col:
    return Col(name, INT, description, NONNEG)


EPOCH = (pa.Check.in_range(EPOCH_MIN, EPOCH_MAX),)
PROBE_TIME = Col("time_s", INT, "wall-clock second at the end of the probe interval (epoch seconds)", EPOCH)
SAMPLE_TIME = Col("time_s", FLOAT, "wall-clock time of the sample (epoch seconds, ms resolution)", EPOCH)
# A table the sampler reads after the sample's counters, stamped when it read it (its clocks).
LISTING_TIME = Col(
    "time_s",
    FLOAT,
    "wall-clock time ss listed the flows (epoch seconds, ms resolution): within the sample that "
    "began at or before it (counters.csv's time_s), later by what the sampler did first",
    EPOCH,
)
NETNS = Col(
    "netns",
    INT,
    "network namespace inode number (as in /proc/PID/ns/net; metadata.json maps names to it)",
    (pa.Check.gt(0),),
)

ADDR_FAMILY = Col("family", INT, "address family: 2 = IPv4, 10 = IPv6", (pa.Check.isin([2, 10]),))
# Probe rows keyed by flow: the socket's own local and remote address and port.
FLOW_ADDRESSES = (
    Col("laddr", STR, "local address"),
    Col("lport", INT, "local port", PORT),
    Col("raddr", STR, "remote address"),
    Col("rport", INT, "remote port", PORT),
)

# Probe rows keyed by endpoint: the service port is the lower of the two ports,
# so one client's many ephemeral ports fold into one key.
ENDPOINT_KEY = (
    PROBE_TIME,
    NETNS,
    ADDR_FAMILY,
    Col("laddr", STR, "local address"),
    Col("raddr", STR, "remote address"),
    Col("service_port", INT, "the lower of the two ports (the server's, as a rule)", PORT),
    Col(
        "service_local",
        INT,
        "1 if the service port is local (we are the server), 0 if remote",
        (pa.Check.isin([0, 1]),),
    ),
)


# Which listening socket a row is about: one member of a SO_REUSEPORT group is not the group.
SOCK_INO = Col(
    "sock_ino",
    INT,
    "the listening socket's inode (ss -e ino:, listeners.csv sock_ino); 0: not known (a kernel socket, or a "
    "run of contract 9 or older, whose rows of one address and port may be several sockets)",
    NONNEG,
)
