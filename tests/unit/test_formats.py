from sits.formats import BY_V4L2, drm_for_v4l2, fourcc, fourcc_str, v4l2_for_drm


def test_fourcc_round_trip():
    assert fourcc("YUYV") == 0x56595559
    assert fourcc_str(fourcc("XR24")) == "XR24"


def test_v4l2_drm_mapping_follows_memory_layout():
    # vivid's XR24 (V4L2 XBGR32: bytes B,G,R,X) is DRM XRGB8888, also 'XR24'
    assert drm_for_v4l2("XR24") == "XR24"
    assert drm_for_v4l2("RGBP") == "RG16"
    assert drm_for_v4l2("BGR3") == "RG24"
    assert v4l2_for_drm("RG16") == "RGBP"
    assert drm_for_v4l2("MJPG") is None
    assert not BY_V4L2["YUYV"].rgb


def test_short_v4l2_names_are_space_padded():
    assert fourcc("Y10") == fourcc("Y10 ")
    assert fourcc_str(fourcc("Y10 ")) == "Y10"
