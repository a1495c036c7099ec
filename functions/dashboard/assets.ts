/** The dashboard's only stylesheet and script, served from memory: there is no front-end build. */

export const APP_CSS = `
:root {
  --bg: #ffffff; --fg: #1b1f24; --muted: #515a66; --line: #d0d7de; --panel: #f6f8fa;
  --accent: #0b57d0; --accent-fg: #ffffff; --danger: #b3261e; --danger-bg: #fdecea;
  --ok: #116329; --ok-bg: #dafbe1; --warn: #7d4e00; --warn-bg: #fff8c5; --focus: #0b57d0;
  color-scheme: light dark;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --fg: #e6edf3; --muted: #9da7b3; --line: #30363d; --panel: #161b22;
    --accent: #4493f8; --accent-fg: #0d1117; --danger: #ff7b72; --danger-bg: #3c1618;
    --ok: #56d364; --ok-bg: #12261e; --warn: #e3b341; --warn-bg: #2e2410; --focus: #79c0ff;
  }
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -9999px; top: 0; background: var(--accent); color: var(--accent-fg); padding: .5rem 1rem; z-index: 10; }
.skip:focus { left: .5rem; top: .5rem; }
header.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .75rem 1rem; border-bottom: 1px solid var(--line); background: var(--panel); }
.brand { font-weight: 700; font-size: 1.1rem; color: var(--fg); text-decoration: none; }
nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: 0; padding: 0; }
nav a { display: inline-block; padding: .25rem 0; text-decoration: none; }
nav a[aria-current="page"] { font-weight: 700; text-decoration: underline; text-underline-offset: .3em; }
.who { margin-left: auto; display: flex; align-items: center; gap: .75rem; color: var(--muted); font-size: .9rem; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; margin: .5rem 0 1rem; word-break: break-word; }
h2 { font-size: 1.2rem; margin: 2rem 0 .75rem; }
.alert { border: 1px solid var(--danger); background: var(--danger-bg); color: var(--fg); padding: .75rem 1rem; border-radius: 6px; margin: 0 0 1rem; }
.alert strong { color: var(--danger); }
.notice { border: 1px solid var(--line); background: var(--panel); padding: .75rem 1rem; border-radius: 6px; }
.table-wrap { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; font-size: .95rem; }
th, td { text-align: left; padding: .5rem .75rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); font-weight: 600; white-space: nowrap; }
tr:last-child td { border-bottom: 0; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .875rem; word-break: break-all; }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .85rem; border: 1px solid var(--line); background: var(--panel); color: var(--fg); white-space: nowrap; }
.badge.healthy, .badge.succeeded, .badge.up { background: var(--ok-bg); color: var(--ok); border-color: var(--ok); }
.badge.degraded, .badge.running, .badge.queued, .badge.stale { background: var(--warn-bg); color: var(--warn); border-color: var(--warn); }
.badge.unreachable, .badge.failed, .badge.interrupted, .badge.down, .badge.unavailable { background: var(--danger-bg); color: var(--danger); border-color: var(--danger); }
dl.facts { display: grid; grid-template-columns: minmax(max-content, 7rem) 1fr; gap: .35rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; word-break: break-word; }
/* The run's outcome is its own list (it is swapped in live) but reads as the rest of the one above. */
#run-outcome > dl.facts { margin-top: .35rem; }
form.card { border: 1px solid var(--line); border-radius: 6px; padding: 1rem; background: var(--panel); margin: 0 0 1rem; }
form.card h3, form.card legend { margin: 0 0 .75rem; font-size: 1.05rem; font-weight: 600; }
.fields { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: .75rem 1rem; margin-bottom: .75rem; }
.field { display: flex; flex-direction: column; gap: .25rem; }
.field.check { flex-direction: row; align-items: center; gap: .5rem; }
label, .field .label { font-weight: 600; font-size: .95rem; }
.field p.value { margin: 0; min-height: 2.75rem; display: flex; align-items: center; gap: .4rem; }
.hint { color: var(--muted); font-size: .85rem; font-weight: 400; }
input[type=text], input[type=password], input[type=number], select {
  font: inherit; padding: .5rem .6rem; border: 1px solid var(--muted); border-radius: 6px; background: var(--bg); color: var(--fg); min-height: 2.75rem; width: 100%;
}
input[type=checkbox] { width: 1.25rem; height: 1.25rem; }
button { font: inherit; font-weight: 600; min-height: 2.75rem; padding: .5rem 1rem; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: var(--accent-fg); cursor: pointer; }
button.secondary { background: transparent; color: var(--accent); }
button.danger { background: var(--danger); border-color: var(--danger); color: #fff; }
.actions { display: flex; flex-wrap: wrap; gap: .75rem; align-items: flex-start; margin: 0 0 1rem; }
.actions form { margin: 0; }
form.card .field.check + .actions { margin: .75rem 0 0; }
form.card .field.check + .fields { margin-top: .75rem; }
.inline { display: inline; }
details { margin: .25rem 0; }
summary { cursor: pointer; color: var(--accent); min-height: 1.75rem; }
ol.log { list-style: none; margin: 0; padding: .5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--panel); font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85rem; max-height: 32rem; overflow: auto; }
ol.log li { display: grid; grid-template-columns: 6rem 3.5rem 1fr; gap: .5rem; padding: .15rem .25rem; border-bottom: 1px dashed var(--line); }
ol.log li:last-child { border-bottom: 0; }
ol.log .warn { color: var(--warn); }
ol.log .error { color: var(--danger); }
ol.log .msg { word-break: break-word; white-space: pre-wrap; }
/* Events loaded into the gap must not push the one being read out of view: no scroll anchoring. */
ol.log { overflow-anchor: none; }
ol.log li.log-gap { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1rem; margin: .25rem 0; padding: .5rem .75rem; border: 1px dashed var(--muted); border-radius: 6px; background: var(--bg); font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: .95rem; }
ol.log li.log-gap:last-child { border-bottom: 1px dashed var(--muted); }
ol.log li.log-gap button { min-height: 2.25rem; padding: .25rem .75rem; }
.log-count { margin: 0 0 .5rem; }
.sparkline { color: var(--accent); vertical-align: middle; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .75rem; overflow: auto; font-size: .85rem; }
.login { max-width: 28rem; margin: 2rem auto; }
textarea { font: inherit; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; padding: .5rem .6rem; border: 1px solid var(--muted); border-radius: 6px; background: var(--bg); color: var(--fg); width: 100%; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.field-error { color: var(--danger); background: var(--danger-bg); border-left: 4px solid var(--danger); padding: .5rem .75rem; margin: 0 0 .75rem; border-radius: 4px; }
.danger-zone { border-color: var(--danger); }
.downloads { margin: 0 0 1rem; }
.health .reason { display: inline-block; max-width: 32rem; overflow-wrap: anywhere; margin-left: .4rem; }
/* An address breaks only when it cannot fit whole: a port split from its host reads as two values. */
td.addr { word-break: normal; overflow-wrap: break-word; }
ul.reasons, ul.plain { margin: .25rem 0; padding-left: 1.25rem; overflow-wrap: anywhere; }
ul.plain li { margin: .25rem 0; }
ul.plain form.inline { margin-left: .5rem; }
form.card > .field + .field { margin-top: .75rem; }
form.card > .field:last-of-type { margin-bottom: .75rem; }
.filters { display: flex; flex-wrap: wrap; gap: .75rem 1rem; align-items: flex-end; margin: 0 0 1rem; }
.filters .field { min-width: 10rem; }
.filters .field.check { min-height: 2.75rem; }
fieldset.scopes { border: 0; padding: 0; margin: 0 0 .75rem; display: flex; gap: 1rem; flex-wrap: wrap; }
fieldset.scopes legend { font-weight: 600; margin-bottom: .25rem; }
.secret input { width: 100%; }
table.runs td a { overflow-wrap: anywhere; }
.usage { white-space: nowrap; }
.windows { display: flex; flex-wrap: wrap; gap: .5rem; margin: 0 0 1rem; }
.chip { border: 1px solid var(--line); border-radius: 999px; padding: .3rem .8rem; text-decoration: none; min-height: 2.25rem; display: inline-flex; align-items: center; }
.chip[aria-current="true"] { background: var(--accent); color: var(--accent-fg); border-color: var(--accent); }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 26rem), 1fr)); gap: 1rem; }
figure.chart-box { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: .5rem .75rem; background: var(--panel); min-width: 0; }
figure.chart-box figcaption { font-weight: 600; margin-bottom: .25rem; }
figure.chart-box .now { color: var(--accent); font-variant-numeric: tabular-nums; }
svg.chart { width: 100%; height: auto; display: block; font-family: system-ui, sans-serif; }
svg.chart .grid { stroke: var(--line); stroke-width: 1; }
svg.chart .axis { stroke: var(--muted); stroke-width: 1; }
svg.chart .tick { fill: var(--muted); font-size: 12px; }
svg.chart .empty { fill: var(--muted); font-size: 14px; }
svg.chart .line { fill: none; stroke: var(--accent); stroke-width: 2; stroke-linejoin: round; }
svg.chart .dot { fill: var(--accent); }
.plan-summary { font-weight: 600; }
ul.diff { list-style: none; margin: 0 0 1rem; padding: .5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--panel); font-size: .9rem; }
ul.diff li { display: grid; grid-template-columns: 2.5rem 1fr; gap: .1rem .5rem; padding: .2rem 0; }
ul.diff li .hint { grid-column: 2; }
ul.diff .sign { font-family: ui-monospace, monospace; font-weight: 700; }
.diff-add, ul.diff .diff-add .sign { color: var(--ok); }
.diff-change, .diff-replace, ul.diff .diff-change .sign, ul.diff .diff-replace .sign { color: var(--warn); }
.diff-destroy, ul.diff .diff-destroy .sign { color: var(--danger); }
ul.diagnostics { padding-left: 1.25rem; overflow-wrap: anywhere; }
ul.diagnostics p { margin: .25rem 0 .5rem; white-space: pre-wrap; }
tr.row-error td { background: var(--danger-bg); }
/* Below the breakpoint a wide table becomes a stack of cards: each cell on its own line, labelled. */
@media (max-width: 48rem) {
  .table-wrap.cards { border: 0; overflow: visible; }
  .cards table, .cards tbody, .cards tr, .cards td { display: block; width: 100%; }
  .cards thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  .cards tr { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 .75rem; padding: .25rem .5rem; background: var(--bg); }
  .cards td { display: grid; grid-template-columns: 7.5rem 1fr; gap: .5rem; border-bottom: 1px dashed var(--line); padding: .35rem 0; overflow-wrap: anywhere; min-width: 0; }
  .cards td:last-child { border-bottom: 0; }
  .cards td > .badge, .cards td > .health { justify-self: start; }
  .cards td::before { content: attr(data-label); color: var(--muted); font-size: .85rem; }
  .cards td:not([data-label]) { display: block; }
  .cards td.mono { word-break: normal; overflow-wrap: anywhere; }
}
@media (max-width: 40rem) {
  main { padding: .75rem; }
  /* The chart shrinks to the phone's width; its labels grow so they stay readable. */
  svg.chart .tick { font-size: 19px; }
  svg.chart .empty { font-size: 22px; }
  dl.facts { grid-template-columns: 1fr; gap: 0; }
  dl.facts dd { margin-bottom: .5rem; }
  ol.log li { grid-template-columns: auto 1fr; gap: 0 .5rem; }
  ol.log .msg { grid-column: 1 / -1; }
  .who { margin-left: 0; width: 100%; justify-content: space-between; }
  th, td { padding: .45rem .5rem; }
  .actions { flex-direction: column; align-items: stretch; }
  .actions button { width: 100%; }
}
`;

/**
 * The run page's log. A live run: follows it with EventSource. A finished run whose first and last
 * pages do not meet: loads the events between, a page at a time, when asked. Both go through the
 * dashboard's relay of the API (the session cookie goes along, no Authorization header needed);
 * messages are set as text, never as HTML.
 */
export const RUN_LOG_JS = `
(function () {
  var log = document.getElementById('run-log');
  if (!log) return;
  var live = document.getElementById('run-live');
  function pad(n) { return n < 10 ? '0' + n : String(n); }
  function clock(ms) { var d = new Date(ms); return pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds()); }
  function cell(text, cls) { var s = document.createElement('span'); s.textContent = text; if (cls) s.className = cls; return s; }
  function line(e) {
    var li = document.createElement('li');
    li.className = e.level;
    li.setAttribute('data-seq', String(e.seq));
    li.appendChild(cell(clock(e.at), 'at'));
    li.appendChild(cell(e.level, 'level'));
    li.appendChild(cell(e.message, 'msg'));
    return li;
  }
  pages();
  // A run that went wrong is read from its end (once the gap's buttons have taken their room).
  if (log.getAttribute('data-scroll') === 'end') log.scrollTop = log.scrollHeight;
  if (log.getAttribute('data-done') === '1' || !window.EventSource) return;
  var last = Number(log.getAttribute('data-after') || '0');
  function append(e) {
    log.appendChild(line(e));
    log.scrollTop = log.scrollHeight;
  }
  var es = new EventSource(log.getAttribute('data-stream') + '?after=' + last);
  es.addEventListener('run-event', function (m) {
    var e = JSON.parse(m.data);
    if (e.seq <= last) return;
    last = e.seq;
    append(e);
  });
  // The parts that depend on the run's state (result, plan, per-node progress, Approve and Retry)
  // are rendered by the server; a fresh copy replaces them, so the page never needs a reload.
  var outcomeUrl = location.pathname + '?part=outcome';
  var refreshing = null;
  function refreshOutcome(then) {
    var req = new XMLHttpRequest();
    req.open('GET', outcomeUrl);
    req.onload = function () {
      if (req.status === 200) {
        var box = document.getElementById('run-outcome');
        var tmp = document.createElement('div');
        tmp.innerHTML = req.responseText;
        var fresh = tmp.querySelector('#run-outcome');
        if (box && fresh) box.parentNode.replaceChild(fresh, box);
      }
      if (then) then();
    };
    req.onerror = function () { if (then) then(); };
    req.send();
  }
  function soon() {
    if (refreshing) return;
    refreshing = setTimeout(function () { refreshing = null; refreshOutcome(); }, 1000);
  }
  es.addEventListener('run-event', function (m) {
    var e = JSON.parse(m.data);
    if (e.data && (e.data.node || e.data.phase)) soon();
  });
  es.addEventListener('end', function (m) {
    es.close();
    var run = JSON.parse(m.data);
    log.setAttribute('data-done', '1');
    if (refreshing) { clearTimeout(refreshing); refreshing = null; }
    refreshOutcome(function () {
      if (live) live.textContent = 'Run finished' + (run ? ': ' + run.state : '') + '.';
    });
  });
  es.onerror = function () { if (live && log.getAttribute('data-done') !== '1') live.textContent = 'Connection lost; retrying...'; };
  es.onopen = function () { if (live) live.textContent = 'Following the run live.'; };

  /** The gap between a finished run's first and last pages, filled a page at a time on request. */
  function pages() {
    var gap = document.getElementById('log-gap');
    var more = document.getElementById('log-more');
    var earlier = document.getElementById('log-earlier');
    var gapText = document.getElementById('log-gap-text');
    var count = document.getElementById('log-count');
    if (!gap || !more || !earlier || !gapText) return;
    var PAGE = Number(gap.getAttribute('data-page')) || 1000;
    var total = Number(log.getAttribute('data-total') || '0');
    function fmt(n) { return String(n).replace(/\\B(?=(\\d{3})+(?!\\d))/g, ','); }
    function events(n) { return fmt(n) + (n === 1 ? ' event' : ' events'); }
    function bound(name) { return Number(gap.getAttribute('data-' + name)); }
    function missing() { return bound('before') - bound('after') - 1; }
    function relabel() {
      var n = fmt(Math.min(missing(), PAGE));
      gapText.textContent = events(missing()) + ' not shown.';
      more.textContent = 'Show ' + n + ' more';
      earlier.textContent = 'Show ' + n + ' earlier';
    }
    function recount() {
      if (!count) return;
      var shown = log.querySelectorAll('li[data-seq]').length;
      count.textContent = shown < total ? 'Showing ' + fmt(shown) + ' of ' + events(total) + '.'
        : total === 1 ? 'Showing the one event.' : 'Showing all ' + events(total) + '.';
    }
    function busy(on) { more.disabled = on; earlier.disabled = on; gap.setAttribute('aria-busy', on ? 'true' : 'false'); }
    // Forward: the page right after the first part. Back: the page that ends where the last part begins.
    function load(forward) {
      var before = bound('before');
      var from = forward ? bound('after') : Math.max(bound('after'), before - 1 - PAGE);
      var limit = Math.min(PAGE, before - 1 - from);
      busy(true);
      var req = new XMLHttpRequest();
      req.open('GET', log.getAttribute('data-stream') + '?after=' + from + '&limit=' + limit);
      req.setRequestHeader('accept', 'application/json');
      req.onload = function () {
        var body = null;
        // An ended session answers with the login page, not JSON.
        try { body = req.status === 200 ? JSON.parse(req.responseText) : null; } catch (err) { body = null; }
        busy(false);
        if (!body || !body.events) { gapText.textContent = 'The events could not be loaded; reload the page (the session may have ended).'; return; }
        var got = body.events.filter(function (e) { return e.seq > from && e.seq < before; });
        var where = forward ? gap : gap.nextSibling;
        for (var i = 0; i < got.length; i++) log.insertBefore(line(got[i]), where);
        // Seqs have no holes, so an empty answer means the gap is closed, not that it is stuck.
        if (forward) gap.setAttribute('data-after', String(got.length ? got[got.length - 1].seq : before - 1));
        else gap.setAttribute('data-before', String(got.length ? got[0].seq : from + 1));
        recount();
        if (missing() > 0) return relabel();
        var focused = document.activeElement === more || document.activeElement === earlier;
        gap.parentNode.removeChild(gap);
        // The button went with the gap; focus stays in the log rather than falling back to the page.
        if (focused) { log.setAttribute('tabindex', '-1'); log.focus(); }
      };
      req.onerror = function () { busy(false); gapText.textContent = 'The events could not be loaded; check the connection and try again.'; };
      req.send();
    }
    more.addEventListener('click', function () { load(true); });
    earlier.addEventListener('click', function () { load(false); });
    more.hidden = false;
    earlier.hidden = false;
  }
})();
`;
