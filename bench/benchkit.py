"""What bench/fanout and bench/inbox share (issue 20): a throwaway PostgreSQL, Hollo's and the
Fedify harness's nodes as separate processes, and per-process CPU and peak-RSS accounting read
from /proc. Standard library only."""
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "target"
HOLLO = TARGET / "release" / "hollo"
HARNESS = TARGET / "fedify-harness"
SECRET = "bench-secret-key-0123456789abcdef0123456789"
# Activity slots per worker process: Hollo's ACTIVITY_CONCURRENCY default and upstream Hollo's
# ParallelMessageQueue(…, 10).
SLOTS = 10
# Deliveries in flight per Hollo worker process: DELIVERY_CONCURRENCY, slots of their own beside
# the activity slots (its default 64 unless the environment says otherwise).
DELIVERY_SLOTS = int(os.environ.get("DELIVERY_CONCURRENCY", "64"))
CLK = os.sysconf("SC_CLK_TCK")
# BEFORE=path/to/another/hollo adds the side `before`: the same Hollo rounds with that build's
# binary (an A/B of two commits, e.g. the one before a refactor), reported as after/before.
BEFORE = os.environ.get("BEFORE")
if BEFORE and not Path(BEFORE).is_file():
    raise SystemExit(f"BEFORE={BEFORE!r} is not a file (a `hollo` binary of another build)")
# Which sides a run measures: Hollo and Fedify by default (the ratios need both), Hollo and the
# other build with BEFORE; SIDES=hollo measures only Hollo, for quick iterations on its figures.
SIDES = [s for s in os.environ.get("SIDES", "hollo,before" if BEFORE else "hollo,fedify")
         .split(",") if s]
if not SIDES or any(s not in ("hollo", "fedify", "before") for s in SIDES) or \
        ("before" in SIDES and not BEFORE):
    raise SystemExit(f"SIDES must list hollo, fedify and (with BEFORE) before, not "
                     f"{os.environ.get('SIDES')!r}")


def hollo_binary(side):
    """The `hollo` a Hollo side runs: this build's, or BEFORE's for the side `before`."""
    return Path(BEFORE) if side == "before" else HOLLO


def ab_line(name, med, keys):
    """`NAME_ab k=after/before …` for the keys (higher is better unless the key ends in _ms),
    when the run measured both builds; None otherwise."""
    if not {"hollo", "before"} <= med.keys():
        return None
    a, b = med["hollo"], med["before"]
    return f"{name}_ab " + " ".join(f"{k}={a[k] / b[k]:.3f}" for k in keys if b[k])


class Report:
    def __init__(self, path):
        self.path = Path(path)
        self.path.write_text("")

    def say(self, line):
        print(line, flush=True)
        with self.path.open("a") as f:
            f.write(line + "\n")


def log(line):
    print(line, file=sys.stderr, flush=True)


def raise_fd_limit(want=200_000):
    """Every process of a run inherits this. The sink alone holds one listener per host plus
    every connection a sender keeps alive (10 000 hosts: up to 20 000 descriptors), so the
    usual hard limit is not enough; root may raise it (up to fs.nr_open)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, hard), max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        log(f"bench: open files limited to {soft}; shapes with many hosts may measure the limit")


def build(*bins):
    log("== build (release)")
    args = ["cargo", "build", "--release", "-q", "-p", "hollo-runtime"]
    for b in ("hollo", *bins):
        args += ["--bin", b]
    subprocess.run(args, cwd=ROOT, check=True)


def free_port():
    """A port free on every local address: nodes bind 0.0.0.0, and a port that is free on
    127.0.0.1 may still be held on another loopback address (bench/streaming's clients dial
    from 127.0.0.1-8, and the next bench's node once failed to bind such a port)."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


# --- process accounting -------------------------------------------------------------------


def cpu_seconds(pid, children=False):
    """utime+stime of a process (plus its reaped children's when asked), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK


def peak_rss_kb(pid):
    try:
        m = re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def postgres_cpu(postmaster):
    """The server's CPU: the postmaster with its reaped backends plus the live ones."""
    total = cpu_seconds(postmaster, children=True)
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int(p.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == postmaster:
                total += cpu_seconds(int(p.name))
    return total


class Snapshot:
    """CPU of a set of node processes and of PostgreSQL at one instant."""

    def __init__(self, pg, procs):
        self.at = time.time()
        self.procs = [cpu_seconds(p.pid) for p in procs]
        self.pg = postgres_cpu(pg.postmaster)


# --- PostgreSQL ---------------------------------------------------------------------------


class Counter:
    """See `Postgres.counter`; call it for the current value, `close` it when done."""

    def __init__(self, url, sql):
        self.sql = sql.strip().rstrip(";") + ";\n"
        self.proc = subprocess.Popen(
            ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PGOPTIONS": "-c client_min_messages=warning"})

    def __call__(self):
        self.proc.stdin.write(self.sql)
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"bench: psql ended while polling {self.sql.strip()!r}")
        return int(line.strip() or 0)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class Postgres:
    def __init__(self, name, statements=False):
        """`statements`: load pg_stat_statements (a restart), so `top_statements` can say
        where the server's time went."""
        self.dir = TARGET / f"{name}-pg"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.start()
        if statements:
            self.psql("postgres",
                      "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';")
            subprocess.run([HOLLO, "local-db", "stop", "--dir", self.dir], capture_output=True)
            self.start()
            self.psql("postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;")
            # Planning counted apart: a statement re-planned on each run shows it here.
            self.psql("postgres", "ALTER SYSTEM SET pg_stat_statements.track_planning = on;")
            self.psql("postgres", "SELECT pg_reload_conf();")

    def start(self):
        out = subprocess.run([HOLLO, "local-db", "start", "--dir", self.dir], check=True,
                             capture_output=True, text=True)
        self.admin = out.stdout.strip().splitlines()[-1]
        pid_file = next(self.dir.rglob("postmaster.pid"))
        self.postmaster = int(pid_file.read_text().split()[0])

    def reset_statements(self):
        self.psql("postgres", "SELECT pg_stat_statements_reset();")

    def top_statements(self, n=15):
        """The statements that took the most execution time since the last reset: total ms,
        calls, ms per call, rows and shared buffers touched per call (a scan stepping over
        dead or locked rows shows here), the statement's start."""
        return self.psql("postgres", f"""
            SELECT round(total_exec_time::numeric) || ' ms | ' || calls || ' calls | '
                   || round((total_exec_time / calls)::numeric, 3) || ' ms | '
                   || plans || ' plans ' || round(total_plan_time::numeric) || ' ms | '
                   || round(rows::numeric / calls, 1) || ' rows | '
                   || round((shared_blks_hit + shared_blks_read)::numeric / calls, 1)
                   || ' blks | ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 120)
              FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT {n};""")

    def url(self, db):
        return self.admin.replace("/postgres?", f"/{db}?", 1)

    def psql(self, db, script):
        out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                              self.url(db)], input=script, check=True, capture_output=True,
                             text=True, env={**os.environ,
                                             "PGOPTIONS": "-c client_min_messages=warning"})
        return out.stdout.strip()

    def counter(self, db, sql):
        """A function that runs `sql` (one integer) on one psql session kept open: a poll
        every 20 ms through a new psql each time cost the measured machine about 9 % of its
        CPU (process start, a new backend, its catalog caches)."""
        return Counter(self.url(db), sql)

    def fresh_db(self, db):
        self.psql("postgres", f"DROP DATABASE IF EXISTS {db} WITH (FORCE);")
        self.psql("postgres", f"CREATE DATABASE {db};")
        return self.url(db)

    def stop(self):
        subprocess.run([HOLLO, "local-db", "stop", "--dir", self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


# --- processes ----------------------------------------------------------------------------


def wait_ready(proc, what):
    line = proc.stdout.readline().strip()
    if not line.startswith("ready"):
        raise SystemExit(f"bench: {what} did not start ({line!r})")
    return line


def wait_http(url, deadline_s=60):
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"bench: {url} never answered 200")


def post(url, body, token=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    if token:
        req.add_header("authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


class Nodes:
    """A web node and worker processes of one implementation, stopped on exit."""

    def __init__(self):
        self.procs = []
        self.port = free_port()
        self.token = None

    @property
    def web(self):
        return self.procs[0]

    @property
    def workers(self):
        return self.procs[1:]

    def __enter__(self):
        return self

    def __exit__(self, *_):
        stop(self.procs)


def hollo_nodes(pg, db, workers, extra_env=None, binary=HOLLO):
    """Migrates `db`, creates the account `bench` and starts Hollo's web node and workers (of
    `binary`: this build's, or another's for an A/B)."""
    nodes = Nodes()
    url = pg.fresh_db(db)
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": url, "SECRET_KEY": SECRET,
           "PUBLIC_URL": f"http://127.0.0.1:{nodes.port}", "ALLOW_PRIVATE_ADDRESS": "true",
           "LOG_LEVEL": "warn", "ACTIVITY_CONCURRENCY": str(SLOTS),
           "DELIVERY_CONCURRENCY": str(DELIVERY_SLOTS), **(extra_env or {})}
    subprocess.run([binary, "migrate"], env=env, check=True, capture_output=True)
    out = subprocess.run([binary, "account", "create", "bench"], env=env, check=True,
                         capture_output=True, text=True)
    nodes.token = out.stdout.strip().splitlines()[-1]
    try:
        nodes.procs.append(subprocess.Popen(
            [binary, "serve"], stdout=subprocess.DEVNULL,
            env={**env, "NODE_TYPE": "web", "PORT": str(nodes.port), "HEALTH_PORT": "0"}))
        for _ in range(workers):
            health = free_port()
            nodes.procs.append(subprocess.Popen(
                [binary, "serve"], stdout=subprocess.DEVNULL,
                env={**env, "NODE_TYPE": "worker", "HEALTH_PORT": str(health)}))
            wait_http(f"http://127.0.0.1:{health}/readyz")
        wait_http(f"http://127.0.0.1:{nodes.port}/readyz")
    except BaseException:
        stop(nodes.procs)
        raise
    return nodes


def install_harness():
    """The Fedify harness with its pinned dependencies under target/; (node, versions)."""
    src = ROOT / "bench" / "fedify-harness"
    HARNESS.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json", ".npmrc", "harness.mjs"):
        shutil.copy2(src / name, HARNESS / name)
    if not (HARNESS / "node_modules" / ".bin" / "node").exists():
        log("== npm ci (Fedify harness, pinned in bench/fedify-harness/package-lock.json)")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HARNESS, check=True,
                       stdout=sys.stderr)
    node = HARNESS / "node_modules" / ".bin" / "node"
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    fedify = json.loads((HARNESS / "node_modules/@fedify/fedify/package.json").read_text())
    return node, f"Fedify {fedify['version']} on Node {version}"


def fedify_nodes(pg, node, db, workers, recipients=None):
    """Starts the Fedify harness's web node and workers on a fresh `db`."""
    nodes = Nodes()
    url = pg.fresh_db(db)
    keys = HARNESS / "keys.json"
    subprocess.run([node, "harness.mjs", "keygen", keys], cwd=HARNESS, check=True)
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": url,
           "ORIGIN": f"http://127.0.0.1:{nodes.port}", "KEYS": str(keys),
           "PARALLEL": str(SLOTS)}
    if recipients is not None:
        path = HARNESS / "recipients.json"
        path.write_text(json.dumps(recipients))
        env["RECIPIENTS"] = str(path)
    try:
        nodes.procs.append(subprocess.Popen(
            [node, "harness.mjs"], cwd=HARNESS, stdout=subprocess.PIPE, text=True,
            env={**env, "ROLE": "web", "PORT": str(nodes.port)}))
        wait_ready(nodes.web, "the Fedify web node")
        for _ in range(workers):
            nodes.procs.append(subprocess.Popen(
                [node, "harness.mjs"], cwd=HARNESS, stdout=subprocess.PIPE, text=True,
                env={**env, "ROLE": "worker"}))
            wait_ready(nodes.procs[-1], "a Fedify worker")
    except BaseException:
        stop(nodes.procs)
        raise
    return nodes
