"""The viewer's stylesheet and its few lines of script, inlined into every page (no build step).

Tokens carry their values as CSS variables (`--p`: the sampled token's probability, `--a`: its
advantage clipped to -1..1); the token box's class (`by-mask`, `by-logprob`, `by-advantage`)
picks which one colours the background, so switching the view changes one class.
"""

STYLE = """
:root { --ok: #1a7f37; --fail: #b42318; --muted: #6b6b70; --line: #e3e3e6; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; line-height: 1.4; }
header { background: #20232a; color: #fff; padding: .5em 1.2em; display: flex; gap: 1.2em; align-items: baseline;
         flex-wrap: wrap; }
header a { color: #cfe3ff; text-decoration: none; } header a.here { color: #fff; font-weight: 600; }
header .run { font-weight: 700; color: #fff; margin-right: 1em; }
main { padding: 1em 1.2em; max-width: 1500px; }
a { color: #0b57d0; }
.muted { color: var(--muted); font-size: .9em; }
.ok { color: var(--ok); font-weight: 600; } .fail { color: var(--fail); font-weight: 600; }
.badge { display: inline-block; padding: 0 .45em; border-radius: 8px; font-size: .8em; background: #eef;
         margin-left: .3em; }
.badge.bad, .badge.err { background: #fdecea; color: var(--fail); }
.badge.guided { background: #fff3d6; color: #8a5a00; }
form.filters { display: flex; flex-wrap: wrap; gap: .5em .9em; align-items: end; margin-bottom: .8em;
               background: #f6f6f8; padding: .6em .8em; border-radius: 6px; }
form.filters label { display: flex; flex-direction: column; font-size: .8em; color: #444; }
form.filters input, form.filters select { font-size: .95em; padding: .15em .3em; }
form.filters input.num { width: 5em; } form.filters input.wide { width: 16em; }
table.list { border-collapse: collapse; width: 100%; font-size: .9em; }
table.list th, table.list td { padding: .25em .55em; border-bottom: 1px solid var(--line); text-align: left;
                               white-space: nowrap; }
table.list td.err { white-space: normal; max-width: 28em; color: var(--fail); }
table.list th a { color: inherit; text-decoration: none; } table.list th a.sorted { text-decoration: underline; }
table.list td.num, table.list th.num { text-align: right; }
table.list tr.badline td { background: #fdecea; }
.pager { margin: .8em 0; display: flex; gap: 1em; align-items: center; }
.notice { padding: .5em .8em; background: #fff6e5; border: 1px solid #f0d8a8; border-radius: 4px; margin: .6em 0; }
.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15em 1em; font-size: .92em; margin: .5em 0 1em; }
.meta dt { color: #555; font-weight: 600; } .meta dd { margin: 0; }
.turn { margin: .45em 0; border-left: 3px solid #d0d0d6; padding-left: .6em; }
.turn.assistant { border-left-color: #0b57d0; }
.role { font-weight: 600; font-size: .78em; text-transform: uppercase; color: #555; }
.stepvalue { text-transform: none; font-weight: 400; margin-left: .6em; padding: 0 .4em; border-radius: 3px;
             background: #eef; color: #335; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f8; padding: .45em .6em; margin: .2em 0;
      font-size: .85em; }
.tokens { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .82em; white-space: pre-wrap;
          word-break: break-all; line-height: 1.75; background: #fafafa; border: 1px solid var(--line); padding: .6em; }
.tok { border-radius: 2px; padding: 0 1px; margin: 0 0 0 1px; }
.tok.nl::after { content: "\\21B5"; color: #aaa; }
div.tokens .tok.msample { display: block; margin: .8em 0 .3em; padding: .1em .3em; background: none; color: #555;
  font-weight: 600; border-top: 1px dashed #bbb; outline: none; }
.by-mask .tok.m0 { background: #ececf0; color: #777; }
.by-mask .tok.m1 { background: #c8f0d0; color: #0a3d17; outline: 1px solid #8fd19e; }
.by-logprob .tok.m0, .by-advantage .tok.m0 { color: #999; }
.by-logprob .tok.m1 { background: hsl(calc(var(--p) * 120) 85% 78%); }
.by-advantage .tok { background: color-mix(in srgb, #2e9e4a calc(max(var(--a), 0) * 100%),
                                 color-mix(in srgb, #d63a2f calc(max(calc(var(--a) * -1), 0) * 100%), #fff)); }
.legend { font-size: .82em; color: #444; margin: .3em 0; display: flex; gap: 1em; align-items: center;
          flex-wrap: wrap; }
.legend .tok { display: inline-block; }
.views label { margin-right: .8em; font-size: .9em; }
.group { display: grid; gap: .8em; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); }
.group .card { border: 1px solid #d8d8dc; border-radius: 6px; padding: .5em .7em; font-size: .9em; overflow: hidden; }
.group .card .tokens { max-height: 22em; overflow: auto; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: .8em; }
.chart { border: 1px solid var(--line); border-radius: 6px; padding: .3em .5em; }
.chart h4 { margin: .2em 0; font-size: .85em; font-weight: 600; }
.chart svg { width: 100%; height: auto; } .chart circle:hover { r: 4; }
figure img { max-width: 100%; border: 1px solid var(--line); }
"""

SCRIPT = """
var live = document.getElementById('live');
if (live) {  // the list reloads itself while a run is writing, when asked to
  live.checked = localStorage.getItem('beyondagent-view-live') === '1';
  live.addEventListener('change', function () {
    localStorage.setItem('beyondagent-view-live', live.checked ? '1' : '0');
  });
  setInterval(function () { if (live.checked) { location.reload(); } }, 5000);
}
document.querySelectorAll('input[name=colour]').forEach(function (radio) {
  radio.addEventListener('change', function () {
    document.querySelectorAll('.tokens').forEach(function (box) {
      box.classList.remove('by-mask', 'by-logprob', 'by-advantage');
      box.classList.add('by-' + radio.value);
    });
  });
});
"""
