"""A build polled as the pytorch role polls it (async wheel_build, then build_status until finished), run through
the CLI's ansible-runner driver: the progress display sees Ninja's counter move while the build runs."""

import io
import os
import sys
import textwrap

from instinct_stack.collection import run_playbook
from instinct_stack.progress import Progress

FAKE_BUILD = textwrap.dedent(
    """\
    import os, sys, time
    for done in range(1, 7):
        print("[%d/6] Building CXX object o%d.o" % (done, done), flush=True)
        time.sleep(0.7)
    os.makedirs("dist", exist_ok=True)
    open("dist/fake-1.0-py3-none-any.whl", "w").close()
    """
)


def test_the_display_follows_a_running_build(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "build.py").write_text(FAKE_BUILD)
    playbook = tmp_path / "build.yml"
    playbook.write_text(
        textwrap.dedent(
            """\
            - hosts: all
              gather_facts: false
              tasks:
                - name: Start the build
                  instinct.stack.wheel_build:
                    name: fake
                    src: {src}
                    key: k1
                    cache_dir: {tmp}/cache
                    staging_dir: {tmp}/staging
                    steps: [{{name: bdist_wheel, argv: [{python}, build.py]}}]
                  async: 120
                  poll: 0
                  changed_when: false
                  register: job
                - name: Wait for the build
                  instinct.stack.build_status:
                    results_file: "{{{{ job.results_file }}}}"
                    log: {tmp}/staging/fake-k1/build.log
                  register: done
                  until: done.finished
                  retries: 60
                  delay: 1
            """
        ).format(src=src, tmp=tmp_path, python=sys.executable)
    )
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    builder:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)  # fmt: skip
    seen = []
    progress = Progress(io.StringIO(), live=False)

    def handle(event):
        progress.handle(event)
        if event.get("event") == "runner_retry":
            seen.append(progress.row("builder")["build"])  # what the display shows after each poll
        return True

    events, rc, output, _run_dir = run_playbook(
        str(playbook), str(inventory), event_handler=handle, run_dir=str(tmp_path / "run")
    )
    assert rc == 0, output
    shown = [text for text in seen if text]
    assert shown, seen
    assert all(text.startswith("[") and "/6] " in text for text in shown), shown
    # The count moved while the build ran, and the wait's result is the build's own.
    assert len(set(shown)) > 1, shown
    (final,) = [e for e in events if e["event"] == "runner_on_ok" and e["event_data"]["task"] == "Wait for the build"]
    assert final["event_data"]["res"]["changed"] is True
    assert os.path.basename(final["event_data"]["res"]["wheels"][0]) == "fake-1.0-py3-none-any.whl"
