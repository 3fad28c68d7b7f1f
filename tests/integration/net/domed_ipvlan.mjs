// A domed configured for the uplink egress mode (net_mode = DOMED_NET_MODE, ipvlan or macvlan, on the
// simulated host's uplink up0, pool 10.1.2.64/26), run by test_ipvlan inside its simulated host namespace:
// a jail permitted 10.1.2.3:443 gets data through its slave link, is refused 10.1.2.3:22 and 10.1.2.4:443
// (denial events) and the host's own address; the result's network figures name the mode and a pool
// address; domed's byte quota cuts a download; shutdown leaves no state. Prints `N passed, N failed`.
import fs from 'node:fs';
import path from 'node:path';
import { Domed, RULES, check, finish } from '../../mcp/lib/harness.mjs';

const mode = process.env.DOMED_NET_MODE || 'macvlan';
const domed = await new Domed(['--net-mode', mode, '--net-uplink', 'up0', '--net-uplink-pool', '10.1.2.64/26',
  '--net-uplink-gateway', '10.1.2.254', '--egress-quota', '3000000']).start();
const stateDir = path.join(domed.dir, 'domed-net');
try {
  const rulesFile = path.join(domed.dir, 'rules.cedar');
  fs.writeFileSync(rulesFile, `${RULES}
@id("mirror-443")
permit (principal == Dome::Agent::"code-exec-agent", action == Dome::Action::"net:connect", resource)
when { context.dst_ip == ip("10.1.2.3") && context.dst_port == 443 && context.protocol == "tcp" };
@id("host-8443")
permit (principal == Dome::Agent::"code-exec-agent", action == Dome::Action::"net:connect", resource)
when { context.dst_ip == ip("10.1.2.1") && context.dst_port == 8443 && context.protocol == "tcp" };
`);
  let r = domed.domeStatus('rules', 'apply', rulesFile, '--name', 'mirror');
  check(r.status === 0, 'rules permitting 10.1.2.3:443 (and, by name, the host 10.1.2.1:8443) applied', r.stderr);
  domed.dome('quotas', 'set', '--capability', 'code-execution', '--egress', 'allow');
  const client = await domed.client(domed.register('code-exec-agent', 'code-execution'));
  const code = `
import socket, urllib.request
def tcp(host, port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); return "connected"
    except OSError as e:
        return "refused errno=%s" % e.errno  # a timeout has none
    finally:
        s.close()
print("mirror:", urllib.request.urlopen("http://10.1.2.3:443/", timeout=3).read().decode())
print("port22:", tcp("10.1.2.3", 22))
print("other443:", tcp("10.1.2.4", 443))
print("host:", tcp("10.1.2.1", 8443))
try:
    n = len(urllib.request.urlopen("http://10.1.2.3:443/big?mib=8", timeout=4).read())
except Exception as e:
    n = "cut"
print("big:", n)
`;
  const result = await client.callTool({ name: 'execute_code', arguments: { language: 'python', code } });
  const sc = result.structuredContent ?? {};
  const out = sc.stdout ?? '';
  check(/^mirror: dome-peer-ok$/m.test(out), `${mode}: a jail permitted 10.1.2.3:443 gets data from it`, out || result.content?.[0]?.text);
  check(/^port22: refused errno=1$/m.test(out), `${mode}: 10.1.2.3:22 refused by policy (EPERM)`, out);
  check(/^other443: refused errno=1$/m.test(out), `${mode}: 10.1.2.4:443 refused by policy (EPERM)`, out);
  check(/^host: refused errno=(None|110|113|111|101)$/m.test(out) && !/^host: connected$/m.test(out),
    `${mode}: the host's own address stays unreachable although a rule names it`, out);
  const denials = sc.denials ?? [];
  check(denials.some((d) => d.hook === 'connect4' && d.object === '10.1.2.3:22'), `${mode}: denial event for 10.1.2.3:22`, denials);
  check(denials.some((d) => d.hook === 'connect4' && d.object === '10.1.2.4:443'), `${mode}: denial event for 10.1.2.4:443`, denials);
  const net = sc.network ?? {};
  check(net.egress === true && net.mode === mode && /^10\.1\.2\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])$/.test(net.address ?? ''),
    `${mode}: result.network names the mode and a pool address`, net);
  check(/^big: cut$/m.test(out) && net.quota_bytes === 3000000 && net.quota_exceeded === true && net.connections >= 2,
    `${mode}: domed's egress_quota cuts an 8 MiB download; the counters say so`, [out, net]);
  await client.close();
} finally {
  for (const line of domed.log.split('\n')) if (/component=net /.test(line)) console.log(`  domed: ${line}`);
  const stopped = await domed.stop();
  check(stopped?.code === 0, 'domed stopped cleanly', stopped);
  check(!fs.existsSync(stateDir), 'domed removed its network state directory', fs.existsSync(stateDir) && fs.readdirSync(stateDir));
}
finish();
