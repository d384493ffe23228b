// Host side of kda_chunk_v3 for a CANN operator project (the msopgen layout of Huawei's framework-launch
// samples): TilingFunc, shape / type inference and the operator definition.
//
// NOT COMPILED HERE: it needs CANN's headers (register/op_def_registry.h, tiling/platform/platform_ascendc.h,
// tiling/tiling_api.h). The shape checks, the workspace plan and the UB plan are in kda_chunk_v3_tiling.h,
// which the host emulation's runner compiles and tests/test_ascendc_stubs.py exercises.
//
// Inputs (FLA's layout): q, k [B, T, H, K] and v [B, T, H, V] in fp32 or bf16 (the hand-off type);
// g [B, T, H, K] (log decay, or alpha with gate_is_log = false), beta [B, T, H], optional h0 [B, H, K, V], fp32.
// Outputs: o [B, T, H, V] and ht [B, H, K, V], fp32. Attributes: scale (FLA: K ** -0.5), chunk_size,
// gate_is_log, slots (workspace slots per AI core), a_tiles and g_tiles: the simulator's tile counts of Phases A
// and G (README "Tiling of the real buffers"; bridge.tile_attrs gives them from the plan; g_tiles 0 = the fewest
// that fit a work tile).
#include "kda_chunk_v3_tiling.h"
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
    const int64_t* slots = attrs->GetAttrPointer<int64_t>(3);
    const int64_t* aTiles = attrs->GetAttrPointer<int64_t>(4);   // a_tiles
    const int64_t* gTiles = attrs->GetAttrPointer<int64_t>(5);   // g_tiles
    const ge::DataType dtype = context->GetInputDesc(0)->GetDataType();
    if (!KdaTransferTypeOk(dtype, false)) return ge::GRAPH_FAILED;

    KdaShape shape = KdaShapeOf(context, q, v, dtype, *chunk, *gateIsLog, *scale, static_cast<uint32_t>(*slots));

    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    KdaChunkV3TilingData* tiling = context->GetTilingData<KdaChunkV3TilingData>();
    if (tiling == nullptr) return ge::GRAPH_FAILED;
    if (KdaChunkV3Tiling(shape, platform.GetCoreNumAic(), static_cast<uint32_t>(ubBytes), *tiling,
                         static_cast<uint32_t>(*aTiles), static_cast<uint32_t>(*gTiles)) != nullptr)
        return ge::GRAPH_FAILED;

    // One Matmul object (flag ids 0-1 reserved) for all eight matmuls, tiled for the largest shape; the
    // kernel sets each call's shape with SetOrgShape / SetSingleShape. Operands may be transposed (isTrans).
    const auto mmType = dtype == ge::DT_FLOAT ? matmul_tiling::DataType::DT_FLOAT : matmul_tiling::DataType::DT_BF16;
    matmul_tiling::MatmulApiTiling mm(platform);
    mm.SetAType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mmType, true);
    mm.SetBType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mmType, true);
    mm.SetCType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mmType);
    mm.SetBias(false);
    const int32_t big = tiling->mmTiling.M;
    mm.SetShape(big, big, big);
    mm.SetOrgShape(big, big, big);
    mm.SetBufferSpace(-1, -1, -1);
    if (mm.GetTiling(tiling->mmTiling) == -1) return ge::GRAPH_FAILED;

    context->SetBlockDim(tiling->blockDim);          // AI cores, each 1 AIC + 2 AIVs (KERNEL_TYPE_MIX_AIC_1_2)
    context->SetTilingKey(KdaTilingKey(dtype));
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize() + tiling->wsCoreBytes * tiling->blockDim;
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ops {
class KdaChunkV3 : public OpDef {
public:
    explicit KdaChunkV3(const char* name) : OpDef(name)
    {
        KdaDeclareTensors(*this, {ge::DT_FLOAT, ge::DT_BF16});
        this->Attr("scale").AttrType(REQUIRED).Float();
        this->Attr("chunk_size").AttrType(OPTIONAL).Int(64);
        this->Attr("gate_is_log").AttrType(OPTIONAL).Bool(true);
        this->Attr("slots").AttrType(OPTIONAL).Int(2);
        this->Attr("a_tiles").AttrType(OPTIONAL).Int(2);
        this->Attr("g_tiles").AttrType(OPTIONAL).Int(0);
        this->SetInferShape(ge::KdaInferShape).SetInferDataType(ge::KdaInferDataType);
        this->AICore().SetTiling(optiling::TilingFunc).AddConfig("ascend910b");
    }
};
OP_ADD(KdaChunkV3);
}  // namespace ops
