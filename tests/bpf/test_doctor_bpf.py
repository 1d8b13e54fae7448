import pytest

from sits import doctor

pytestmark = pytest.mark.bpf


def test_doctor_loads_and_attaches_a_real_program():
    result = doctor.bpf()
    assert result["libbpf"]["ok"]
    assert result["load_attach"]["ok"], result["load_attach"]
    assert result["load_attach"]["events"] == 3


def test_tracefs_and_btf_present():
    k = doctor.kernel()
    assert k["btf"]["ok"] and k["tracefs"]["ok"]
