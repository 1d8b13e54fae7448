import json

from sits.cli.app import main


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["nosuch"]) == 2


def test_unknown_option_is_a_usage_error():
    assert main(["doctor", "--bad"]) == 2


def test_doctor_json_has_the_documented_keys(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == ["kernel", "bpf", "v4l2", "drm", "dmabuf", "cuda"]
    assert data["kernel"]["release"]
    for area in ("kernel", "dmabuf"):
        for item in data[area].values():
            if isinstance(item, dict) and "ok" in item and not item["ok"]:
                assert item.get("hint"), item
