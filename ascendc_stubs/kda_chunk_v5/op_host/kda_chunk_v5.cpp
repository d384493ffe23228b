// Host side of kda_chunk_v5 for a CANN operator project (the msopgen layout of Huawei's framework-launch
// samples): TilingFunc, shape / type inference and the operator definition. Same interface as kda_chunk_v3,
// without the attribute slots (v5's workspace has no slots: op_host/kda_chunk_v5_tiling.h).
//
// NOT COMPILED HERE: it needs CANN's headers (register/op_def_registry.h, tiling/platform/platform_ascendc.h,
// tiling/tiling_api.h). The shape checks, the workspace plan and the UB plan are in kda_chunk_v5_tiling.h,
// which the host emulation's runner compiles and tests/test_ascendc_v5.py exercises.
//
// Inputs (FLA's layout): q, k [B, T, H, K] and v [B, T, H, V] in fp32 or bf16 (the hand-off type);
// g [B, T, H, K] (log decay, or alpha with gate_is_log = false), beta [B, T, H], optional h0 [B, H, K, V], fp32.
// Outputs: o [B, T, H, V] and ht [B, H, K, V], fp32 (the state is fp32 between chunks). Attributes: scale
// (FLA: K ** -0.5), chunk_size (a multiple of 32), gate_is_log, intra_a_tiles, state_a_tiles, state_g_tiles and
// state_f2_tiles (F2 in state_f2_tiles Matmul calls, mmTilingOut's singleCoreN = d_v / state_f2_tiles):
// the simulator's tile counts (README "Tiling of the real buffers"; bridge.tile_attrs gives them from the plan;
// state_g_tiles 0 = the fewest that fit). With bf16 the Cube reads the fp32 state as S_hi + S_lo (two parts), as
// kda_chunk_v4 does by default.
#include "kda_chunk_v5_tiling.h"
#include "kda_op_host.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"

namespace optiling {
static ge::graphStatus TilingFunc(gert::TilingContext* context)
{
    const gert::Shape& q = context->GetInputShape(0)->GetStorageShape();
    const gert::Shape& v = context->GetInputShape(2)->GetStorageShape();
    if (q.GetDimNum() != 4 || v.GetDimNum() != 4) return ge::GRAPH_FAILED;
    const gert::RuntimeAttrs* attrs = context->GetAttrs();
    const float* scale = attrs->GetAttrPointer<float>(0);
    const int64_t* chunk = attrs->GetAttrPointer<int64_t>(1);
    const bool* gateIsLog = attrs->GetAttrPointer<bool>(2);
    const int64_t* intraATiles = attrs->GetAttrPointer<int64_t>(3);   // intra_a_tiles
    const int64_t* stateATiles = attrs->GetAttrPointer<int64_t>(4);   // state_a_tiles
    const int64_t* stateGTiles = attrs->GetAttrPointer<int64_t>(5);   // state_g_tiles
    const int64_t* stateF2Tiles = attrs->GetAttrPointer<int64_t>(6);  // state_f2_tiles
    const ge::DataType dtype = context->GetInputDesc(0)->GetDataType();
    if (!KdaTransferTypeOk(dtype, false)) return ge::GRAPH_FAILED;

    KdaShape shape = KdaShapeOf(context, q, v, dtype, *chunk, *gateIsLog, *scale, 1);

    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    KdaChunkV5TilingData* tiling = context->GetTilingData<KdaChunkV5TilingData>();
    if (tiling == nullptr) return ge::GRAPH_FAILED;
    if (KdaChunkV5Tiling(shape, platform.GetCoreNumAic(), static_cast<uint32_t>(ubBytes), *tiling,
                         static_cast<uint32_t>(*stateATiles), static_cast<uint32_t>(*intraATiles),
                         static_cast<uint32_t>(*stateGTiles), static_cast<uint32_t>(*stateF2Tiles)) != nullptr)
        return ge::GRAPH_FAILED;

    // Two Matmul objects (flag ids 0-3 reserved): mm for every workspace matmul (C in the transfer type), mmOut
    // for O = [Q_scaled | A_qk] [S ; V_pseudo] straight to the fp32 output; both tiled for the largest shape
    // (K up to 2 d_k + C); the kernel sets each call's shape with SetOrgShape / SetSingleShape, and C's row
    // length (orgKc) where it differs from B's. Operands may be transposed (isTrans).
    const auto mmType = dtype == ge::DT_FLOAT ? matmul_tiling::DataType::DT_FLOAT : matmul_tiling::DataType::DT_BF16;
    const int32_t big = tiling->mmTiling.M;
    const int32_t f2N = tiling->mmTilingOut.singleCoreN;   // d_v / state_f2_tiles, from KdaChunkV5Tiling
    TCubeTiling* out[2] = {&tiling->mmTiling, &tiling->mmTilingOut};
    for (int i = 0; i < 2; ++i) {
        matmul_tiling::MatmulApiTiling mm(platform);
        mm.SetAType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mmType, true);
        mm.SetBType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mmType, true);
        mm.SetCType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND,
                    i == 0 ? mmType : matmul_tiling::DataType::DT_FLOAT);
        mm.SetBias(false);
        // mmOut's calls each compute singleCoreN = d_v / state_f2_tiles columns of O (the plan's cut, KdaChunkV5Tiling)
        mm.SetShape(big, i == 0 ? big : f2N, big);
        mm.SetOrgShape(big, big, big);
        mm.SetBufferSpace(-1, -1, -1);
        if (mm.GetTiling(*out[i]) == -1) return ge::GRAPH_FAILED;
    }

    context->SetBlockDim(tiling->blockDim);          // AI cores, each 1 AIC + 2 AIVs (KERNEL_TYPE_MIX_AIC_1_2)
    // SyncAll between the passes: blockDim <= the AI cores (KdaChunkV5Tiling), and batch mode, so that every core
    // starts at once (SyncAll.md, 约束说明: without it, concurrent operators that sync across cores can deadlock).
    context->SetScheduleMode(1);
    context->SetTilingKey(KdaTilingKey(dtype));
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize() + KdaV5UserWorkspaceBytes(*tiling);   // per core + per item
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ops {
class KdaChunkV5 : public OpDef {
public:
    explicit KdaChunkV5(const char* name) : OpDef(name)
    {
        KdaDeclareTensors(*this, {ge::DT_FLOAT, ge::DT_BF16});
        this->Attr("scale").AttrType(REQUIRED).Float();
        this->Attr("chunk_size").AttrType(OPTIONAL).Int(64);
        this->Attr("gate_is_log").AttrType(OPTIONAL).Bool(true);
        this->Attr("intra_a_tiles").AttrType(OPTIONAL).Int(1);
        this->Attr("state_a_tiles").AttrType(OPTIONAL).Int(2);
        this->Attr("state_g_tiles").AttrType(OPTIONAL).Int(0);
        this->Attr("state_f2_tiles").AttrType(OPTIONAL).Int(1);
        this->SetInferShape(ge::KdaInferShape).SetInferDataType(ge::KdaInferDataType);
        this->AICore().SetTiling(optiling::TilingFunc).AddConfig("ascend910b");
    }
};
OP_ADD(KdaChunkV5);
}  // namespace ops
