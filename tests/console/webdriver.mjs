// A small WebDriver client (W3C WebDriver, https://www.w3.org/TR/webdriver2/) over chromedriver's
// HTTP API, driving Debian's headless Chromium on loopback. No npm package: fetch is enough.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMEDRIVER = '/usr/bin/chromedriver';
const ELEMENT = 'element-6066-11e4-a52e-4f735466cecf';

export function browserAvailable() {
  return fs.existsSync(CHROMIUM) && fs.existsSync(CHROMEDRIVER);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export class Browser {
  async start() {
    this.port = await freePort();
    this.profile = fs.mkdtempSync(path.join(os.tmpdir(), 'dome-chromium-'));
    this.driver = spawn(CHROMEDRIVER, [`--port=${this.port}`, '--allowed-ips=127.0.0.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.driverLog = '';
    this.driver.stdout.on('data', (c) => { this.driverLog += c; });
    this.driver.stderr.on('data', (c) => { this.driverLog += c; });
    this.base = `http://127.0.0.1:${this.port}`;
    for (const deadline = Date.now() + 15000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      try { if ((await fetch(`${this.base}/status`)).ok) break; } catch { /* not yet */ }
    }
    const answer = await this.command('POST', '/session', {
      capabilities: {
        alwaysMatch: {
          browserName: 'chrome',
          unhandledPromptBehavior: 'ignore',
          'goog:loggingPrefs': { browser: 'ALL' },
          'goog:chromeOptions': {
            binary: CHROMIUM,
            // root on this host: no sandbox; nothing leaves loopback
            args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1280,900',
              `--user-data-dir=${this.profile}`, '--no-first-run', '--enable-precise-memory-info', '--disable-extensions', '--disable-background-networking',
              '--disable-component-update', '--disable-sync', '--metrics-recording-only', '--no-default-browser-check'],
          },
        },
      },
    }, false);
    this.session = answer.sessionId;
    return this;
  }

  async command(method, route, body, inSession = true) {
    const url = `${this.base}${inSession ? `/session/${this.session}` : ''}${route}`;
    const response = await fetch(url, { method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    const answer = await response.json();
    if (!response.ok) {
      const error = new Error(`webdriver ${method} ${route}: ${answer.value?.error}: ${answer.value?.message?.split('\n')[0]}`);
      error.code = answer.value?.error;
      throw error;
    }
    return route === '/session' && !inSession ? answer.value : answer.value;
  }

  go(url) { return this.command('POST', '/url', { url }); }
  url() { return this.command('GET', '/url'); }
  // Run `script` (a function body; arguments as `arguments[i]`) in the page; returns its value.
  run(script, ...args) { return this.command('POST', '/execute/sync', { script, args }); }
  runAsync(script, ...args) { return this.command('POST', '/execute/async', { script, args }); }
  async find(selector) {
    const value = await this.command('POST', '/element', { using: 'css selector', value: selector });
    return value[ELEMENT];
  }
  async findAll(selector) {
    return (await this.command('POST', '/elements', { using: 'css selector', value: selector })).map((v) => v[ELEMENT]);
  }
  click(element) { return this.command('POST', `/element/${element}/click`, {}); }
  type(element, text) { return this.command('POST', `/element/${element}/value`, { text }); }
  clearField(element) { return this.command('POST', `/element/${element}/clear`, {}); }
  text(element) { return this.command('GET', `/element/${element}/text`); }
  // A Chrome DevTools Protocol command through chromedriver (goog/cdp/execute).
  cdp(cmd, params = {}) { return this.command('POST', '/goog/cdp/execute', { cmd, params }); }
  // The page's JavaScript heap in use after a garbage collection, bytes.
  async heapUsed() {
    await this.cdp('HeapProfiler.collectGarbage');
    return (await this.cdp('Runtime.getHeapUsage')).usedSize;
  }
  // The open dialog's text, or null when there is none.
  async dialog() {
    try { return await this.command('GET', '/alert/text'); } catch (error) { if (error.code === 'no such alert') return null; throw error; }
  }
  // The browser console's entries since the last call (chromedriver's log endpoint).
  logs() { return this.command('POST', '/se/log', { type: 'browser' }); }
  async screenshot(file) {
    const data = Buffer.from(await this.command('GET', '/screenshot'), 'base64');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, data);
    return data.length;
  }
  // Wait until `script` returns a truthy value (polling every 25 ms); returns it, or throws after ms.
  async until(script, ms = 5000, ...args) {
    const deadline = Date.now() + ms;
    let last;
    while (Date.now() < deadline) {
      last = await this.run(script, ...args);
      if (last) return last;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`timed out after ${ms} ms waiting for: ${script.slice(0, 120)}`);
  }

  async stop() {
    try { if (this.session) await this.command('DELETE', ''); } catch { /* gone */ }
    if (this.driver && this.driver.exitCode === null) {
      const exited = new Promise((resolve) => this.driver.once('exit', resolve));
      this.driver.kill('SIGTERM');
      const timer = setTimeout(() => this.driver.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    fs.rmSync(this.profile, { recursive: true, force: true });
  }
}
