// A fleet on loopback, for tests/fleet/test_fleet and scripts/bench-fleet: a NATS cluster (JetStream, one
// route per server), child processes logged into one directory and all killed at the end, and HAProxy
// running deploy/haproxy/haproxy.cfg as it is.
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { BUILD, ROOT } from '../../mcp/lib/harness.mjs';

export const TOOL = path.join(BUILD, 'dome-fleet-tool');
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** The path of program `name` on PATH, or "". */
export const which = (name) => spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim();

/** A TCP port of 127.0.0.1 free when asked. */
export async function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => { const { port } = server.address(); server.close(() => resolve(port)); });
  });
}

/** Child processes, each logging into `${dir}/${name}.log`; `exited` resolves with {code, signal}. */
export class Processes {
  constructor(dir) { this.dir = dir; this.children = []; }
  start(command, args, name, env = {}) {
    const log = fs.openSync(path.join(this.dir, `${name}.log`), 'a');
    const child = spawn(command, args, { stdio: ['ignore', log, log], env: { ...process.env, ...env } });
    fs.closeSync(log);
    child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    this.children.push(child);
    return child;
  }
  /** SIGKILL every child still running, and wait for all of them. */
  async killAll() {
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(this.children.map((c) => c.exited));
  }
}

/** `size` nats-server processes in one cluster (JetStream file storage under dir), started by start(i). */
export class NatsCluster {
  static async create(processes, size = 3) {
    const cluster = new NatsCluster(processes);
    for (let i = 0; i < size; i++) cluster.clientPorts.push(await freePort());
    for (let i = 0; i < size; i++) cluster.routePorts.push(await freePort());
    return cluster;
  }
  constructor(processes) {
    this.processes = processes;
    this.binary = which('nats-server');
    this.clientPorts = [];
    this.routePorts = [];
    this.servers = [];
  }
  url(i) { return `nats://127.0.0.1:${this.clientPorts[i]}`; }
  /** Every server's URL, comma-separated (a fleet_url). */
  get all() { return this.clientPorts.map((_, i) => this.url(i)).join(','); }
  start(i) {
    const conf = path.join(this.processes.dir, `nats${i}.conf`);
    fs.writeFileSync(conf, `server_name: n${i}
listen: 127.0.0.1:${this.clientPorts[i]}
jetstream { store_dir: "${path.join(this.processes.dir, `js${i}`)}" }
cluster {
  name: dome-test
  listen: 127.0.0.1:${this.routePorts[i]}
  no_advertise: true
  routes: [${this.routePorts.map((p) => `nats-route://127.0.0.1:${p}`).join(', ')}]
}
`);
    this.servers[i] = this.processes.start(this.binary, ['-c', conf], `nats${i}`);
    return this.servers[i];
  }
  /** Start every server and wait until JetStream answers on each (a meta leader elected), at most 30 s. */
  startAll() {
    this.clientPorts.forEach((_, i) => this.start(i));
    this.clientPorts.forEach((_, i) => execFileSync(TOOL, ['ready', this.url(i), '30']));
  }
}

/** HAProxy on deploy/haproxy/haproxy.cfg, listening on 127.0.0.1:port, its three servers at `addresses`
 * (ADDR:PORT each; the same one thrice makes a single node behind the same proxy). */
export function startHaproxy(processes, port, addresses, name = 'haproxy') {
  return processes.start(which('haproxy'), ['-db', '-f', path.join(ROOT, 'deploy/haproxy/haproxy.cfg')], name, {
    DOME_HAPROXY_BIND: `127.0.0.1:${port}`, DOME_NODE_A: addresses[0], DOME_NODE_B: addresses[1], DOME_NODE_C: addresses[2] });
}

/** Wait until domed `node` logs that it is in fleet mode and caught up, at most 20 s; true when it did. */
export async function inSync(node) {
  const pattern = /msg="fleet mode"|fleet: in sync/;
  for (let t = 0; t < 200 && !pattern.test(node.log); t++) await sleep(100);
  return pattern.test(node.log);
}
